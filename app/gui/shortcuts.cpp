#include "app/gui/shortcuts.h"

#include <imgui.h>

#include "app/gui/gl.h"

namespace rtvd::gui {

const std::vector<Shortcut>& shortcuts() {
  static const std::vector<Shortcut> table = {
      {GLFW_KEY_SPACE, false, "Space", "pause / resume", Command::Pause},
      {GLFW_KEY_PERIOD, false, ".", "one frame (pauses)", Command::Step},
      {GLFW_KEY_R, false, "R", "reset: start the sequence over", Command::Reset},
      {GLFW_KEY_LEFT_BRACKET, false, "[", "previous class", Command::PrevClass},
      {GLFW_KEY_RIGHT_BRACKET, false, "]", "next class", Command::NextClass},
      {GLFW_KEY_F, false, "F", "linear / nearest scaling", Command::Filter},
      {GLFW_KEY_F1, false, "F1", "timing overlay", Command::Overlay},
      {GLFW_KEY_F2, false, "F2", "controls panel", Command::Controls},
      {GLFW_KEY_H, false, "H", "this help", Command::Help},
      {GLFW_KEY_R, true, "Ctrl+R", "start / stop recording", Command::Record},
      {GLFW_KEY_F12, false, "F12", "screenshot of the window (PNG)", Command::Screenshot},
      {GLFW_KEY_ESCAPE, false, "Esc", "quit", Command::Quit},
  };
  return table;
}

std::vector<Command> commands_of(const std::vector<Window::KeyPress>& presses) {
  std::vector<Command> out;
  for (const Window::KeyPress& p : presses)
    for (const Shortcut& s : shortcuts())
      if (s.key == p.key && s.ctrl == p.ctrl) out.push_back(s.command);
  return out;
}

std::string with_key(const char* label, Command c) {
  for (const Shortcut& s : shortcuts())
    if (s.command == c) return std::string(label) + "  [" + s.keys + "]";
  return label;
}

void draw_help(bool* open) {
  if (!*open) return;
  const ImVec2 centre = ImGui::GetMainViewport()->GetCenter();
  ImGui::SetNextWindowPos(centre, ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::Begin("Keyboard shortcuts", open, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings);
  if (ImGui::BeginTable("keys", 2, ImGuiTableFlags_RowBg)) {
    for (const Shortcut& s : shortcuts()) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(s.keys);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(s.what);
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace rtvd::gui
