// rtvd command line: gui, render, info, bench. Errors become one line on stderr and a non-zero exit code.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "kernels/common/error.h"
#include "pipeline/model_files/input_file.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return rtvd::run_command(args);
  } catch (const std::filesystem::filesystem_error& e) {
    // A path that cannot be looked at (a symlink loop, a denied directory), wherever it was examined.
    std::fprintf(stderr, "rtvd: error: %s\n", rtvd::filesystem_error_text(e).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rtvd: error: %s\n", e.what());
    return 1;
  }
}
