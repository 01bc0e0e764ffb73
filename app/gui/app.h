// rtvd gui's frame loop: poll, widgets edit the settings, one engine frame, upload, draw, swap — imgui's
// example_glfw_opengl3 loop around the same Engine that rtvd render drives.
#pragma once
#include "app/gui/gui_options.h"

namespace rtvd::gui {

// Runs the window until it is closed, Esc, or --frames; returns the exit code. Throws Error for what stops
// it before or while running (a bad model or class, no OpenGL 3.3 window, an unwritable --screenshot).
int run(const GuiOptions& options);

}  // namespace rtvd::gui
