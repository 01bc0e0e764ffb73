// rtvd gui: the live window. Its flags are checked in every build; the window needs a build with the GUI
// and a display, and says so in one line (pointing at rtvd render) when either is missing.
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "build_config.h"
#include "cli.h"
#include "commands.h"
#if RTVD_HAS_GUI
#include "app/gui/app.h"
#endif

namespace rtvd {

bool display_available() {
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY"})
    if (const char* v = std::getenv(name); v && *v) return true;
  return false;
}

int gui_command(const std::vector<std::string>& args) {
  const cli::GuiOptions o = cli::parse_gui_options(args);
  if (o.help) {
    std::printf(
        "usage: rtvd gui [flags]\n\nGenerates frames live in a window: steer them with the controls, read the time of every op against\n"
        "the frame budget, record an MP4. H in the window lists the keyboard shortcuts.\n\n%s",
        cli::flags_help(cli::gui_flags()).c_str());
    return 0;
  }
#if RTVD_HAS_GUI
  if (!display_available())
    fail("rtvd gui needs a display (neither DISPLAY nor WAYLAND_DISPLAY is set); 'rtvd render' renders headless "
         "to a file");
  return gui::run(o);
#else
  fail("this rtvd was built without the GUI (RTVD_WITH_GUI off, or GLFW, Dear ImGui or OpenGL not found at configure "
       "time); 'rtvd render' renders headless to a file");
#endif
}

}  // namespace rtvd
