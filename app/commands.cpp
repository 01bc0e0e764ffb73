#include "commands.h"

#include <cstdio>

#include "base/error.h"
#include "build_config.h"

namespace rtvd {

namespace {

constexpr const char* kUsage =
    "rtvd " RTVD_VERSION " - real-time video diffusion\n"
    "\n"
    "usage: rtvd <command> [flags]\n"
    "\n"
    "commands:\n"
    "  gui      generate live in a window: controls, per-op timings, recording (the default with a\n"
    "           display)\n"
    "  render   render frames headless to an MP4 or a PNG sequence\n"
    "  info     print the build's features, the devices and the model\n"
    "  bench    frames: end-to-end frames/s with a per-op profile; unet: one U-Net forward (SD 2.1,\n"
    "           SD 1.5 or a model directory); text: one text encoder forward; kernels: CUDA kernels at\n"
    "           production shapes\n"
    "  help     this text; `rtvd <command> --help` for a command's flags\n";

}  // namespace

int run_command(const std::vector<std::string>& args) {
  if (args.empty() && RTVD_HAS_GUI && display_available()) return gui_command(args);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args[0] == "--version") {
    std::printf("rtvd %s\n", RTVD_VERSION);
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "gui") return gui_command(rest);
  if (args[0] == "render") return render_command(rest);
  if (args[0] == "info") return info_command(rest);
  if (args[0] == "bench") return bench_command(rest);
  fail("unknown command '", args[0], "' (expected gui, render, info, bench or help)");
}

}  // namespace rtvd
