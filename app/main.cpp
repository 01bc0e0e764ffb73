// rtvd command line: gui, render, info, bench. Errors become one line on stderr and a non-zero exit code.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "kernels/common/error.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return rtvd::run_command(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rtvd: error: %s\n", e.what());
    return 1;
  }
}
