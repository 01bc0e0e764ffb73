// The keyboard shortcuts: one table that drives the keys, the help panel and the buttons' labels.
#pragma once
#include <string>
#include <vector>

#include "app/gui/controls.h"
#include "app/gui/window.h"

namespace rtvd::gui {

struct Shortcut {
  int key;           // GLFW key code
  bool ctrl;         // with Ctrl held
  const char* keys;  // as the help panel writes it
  const char* what;
  Command command;
};

const std::vector<Shortcut>& shortcuts();

// The commands of these key presses (keys without a shortcut are ignored).
std::vector<Command> commands_of(const std::vector<Window::KeyPress>& presses);

// "pause [Space]": a button label naming its shortcut.
std::string with_key(const char* label, Command c);

void draw_help(bool* open);  // the help panel: every shortcut, in the middle of the window

}  // namespace rtvd::gui
