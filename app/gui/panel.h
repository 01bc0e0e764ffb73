// A fixed panel of the window's layout: an ImGui window placed on its rect every frame, which the user
// cannot move, resize or collapse. Close it with ImGui::End().
#pragma once
#include <imgui.h>

#include "app/gui/layout.h"

namespace rtvd::gui {

inline void begin_panel(const char* title, const Rect& area) {
  ImGui::SetNextWindowPos(ImVec2(float(area.x), float(area.y)));
  ImGui::SetNextWindowSize(ImVec2(float(area.w), float(area.h)));
  ImGui::Begin(title, nullptr,
               ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                   ImGuiWindowFlags_NoSavedSettings);
}

}  // namespace rtvd::gui
