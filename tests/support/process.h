// Running a built binary from an end-to-end test: arguments pass verbatim (no shell), stdout and stderr
// are captured, and a run that hangs is killed and fails the test instead of the whole suite.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace rtvd::test {

struct RunResult {
  int exit_code = -1;  // 128 + signal when killed
  std::string out, err;
};

// Runs `program args...` with `env` ("NAME=value" entries), writing its output to logs_dir/stdout and
// logs_dir/stderr, with SIGXFSZ at its default action (as from a shell). Past timeout_s it is killed and a test
// failure is added.
RunResult run_program(const std::string& program, const std::vector<std::string>& args,
                      const std::vector<std::string>& env, const std::filesystem::path& logs_dir, int timeout_s = 600);

// This process's environment without the variables named in drop, plus extra ("NAME=value").
std::vector<std::string> environment(const std::vector<std::string>& drop = {},
                                     const std::vector<std::string>& extra = {});

std::string read_file(const std::filesystem::path& path);  // "" when it cannot be read

}  // namespace rtvd::test
