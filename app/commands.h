// The subcommands of the rtvd binary.
#pragma once
#include <string>
#include <vector>

namespace rtvd {

int run_command(const std::vector<std::string>& args);  // dispatch on args[0]
int render_command(const std::vector<std::string>& args);
int info_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);

}  // namespace rtvd
