// The subcommands of the rtvd binary.
#pragma once
#include <string>
#include <vector>

namespace rtvd {

// Dispatch on args[0]; no command: the GUI when this build has it and a display is present, else the help.
int run_command(const std::vector<std::string>& args);
int render_command(const std::vector<std::string>& args);
int info_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);
int gui_command(const std::vector<std::string>& args);

bool display_available();  // DISPLAY or WAYLAND_DISPLAY is set

}  // namespace rtvd
