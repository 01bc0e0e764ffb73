// rtvd command line: gui, render, info, bench. Errors become one line on stderr and a non-zero exit code.
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "commands.h"
#include "pipeline/model_files/input_file.h"

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) would end the process with SIGXFSZ in the middle of a write: no message and a
  // torn file. Ignored, the write fails with EFBIG, and a recording stops as on a full disk: one line, and
  // what was written kept playable.
  std::signal(SIGXFSZ, SIG_IGN);
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
