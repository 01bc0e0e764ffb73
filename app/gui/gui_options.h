// What `rtvd gui` runs with: the generation options every command shares and the window's own. Filled by
// the command line (app/cli.h's parse_gui_options), read by the window (app.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "app/common/controlnet_option.h"
#include "pipeline/engine.h"

namespace rtvd::gui {

struct FrameSize {
  int width = 0, height = 0;
};

// The largest window side --window accepts. X11's window sizes are 16-bit and a larger one ends the process
// with a raw X error; 16384 is Mesa's largest viewport side (the window checks its driver's own at start).
constexpr int kMaxWindowSide = 16384;
// The smallest window (--window, and what the window manager may resize it to): the controls panel, a third
// of it, fits every label, hint and button beside its widgets (gui_test draws it at every width; cuts begin
// below 736).
constexpr int kMinWindowWidth = 800, kMinWindowHeight = 450;

struct GuiOptions : GenerationOptions {
  std::vector<cli::ControlNetOption> controlnets;  // in order; their paths in engine.model.controlnets
  std::optional<int> frames;       // exit after this many frames; not given: run until the window closes
  std::string screenshot;          // PNG of the window written at exit; "" = none
  std::string record;              // start recording here at launch (as render's --output); "" = not
  double fps = 24.0;               // frame rate of recordings
  double budget_ms = 40.0;         // frame-time budget drawn in the overlay
  FrameSize window{1280, 720};     // initial window size in screen coordinates
  bool linear_filter = true;       // --filter linear, or nearest: how the frame is scaled to the window
  bool vsync = true;
  bool help = false;  // -h given: the other values are defaults, nothing was validated
};

}  // namespace rtvd::gui
