#include "app/gui/overlay.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "app/gui/panel.h"
#include "base/error.h"

namespace rtvd::gui {

namespace {

const ImU32 kBudgetColor = IM_COL32(255, 80, 70, 255);
const ImU32 kIntervalColor = IM_COL32(150, 170, 255, 255);
const ImU32 kOpsColor = IM_COL32(110, 230, 120, 255);

// Colours of op types, given in order of first appearance so a type keeps its colour for the run.
ImU32 type_color(const std::string& type) {
  static const ImU32 kPalette[] = {IM_COL32(86, 180, 233, 255),  IM_COL32(230, 159, 0, 255),
                                   IM_COL32(0, 158, 115, 255),   IM_COL32(240, 228, 66, 255),
                                   IM_COL32(213, 94, 0, 255),    IM_COL32(204, 121, 167, 255),
                                   IM_COL32(0, 114, 178, 255),   IM_COL32(170, 170, 170, 255),
                                   IM_COL32(140, 90, 200, 255),  IM_COL32(120, 200, 200, 255)};
  static std::map<std::string, size_t> assigned;
  const auto it = assigned.try_emplace(type, assigned.size()).first;
  return kPalette[it->second % IM_ARRAYSIZE(kPalette)];
}

// Frame intervals and per-frame op time over the last frames, with the budget as a horizontal line.
void history_plot(const FrameStats& stats, float budget_ms, bool gpu) {
  const float width = ImGui::GetContentRegionAvail().x, height = 110.0f;
  const ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + width, p0.y + height);
  float top = budget_ms * 1.25f;
  for (float v : stats.intervals()) top = std::max(top, v * 1.1f);
  for (float v : stats.gpu_ms()) top = std::max(top, v * 1.1f);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(p0, p1, IM_COL32(20, 20, 24, 255));
  const auto y_of = [&](float ms) { return p1.y - height * std::min(ms / top, 1.0f); };
  const auto line = [&](const std::deque<float>& values, ImU32 color) {
    const float dx = width / float(FrameStats::kHistory - 1);
    const float x0 = p1.x - dx * float(values.size() ? values.size() - 1 : 0);
    for (size_t i = 1; i < values.size(); ++i)
      draw->AddLine(ImVec2(x0 + dx * float(i - 1), y_of(values[i - 1])), ImVec2(x0 + dx * float(i), y_of(values[i])),
                    color, 1.5f);
  };
  line(stats.intervals(), kIntervalColor);
  line(stats.gpu_ms(), kOpsColor);
  const float budget_y = y_of(budget_ms);
  draw->AddLine(ImVec2(p0.x, budget_y), ImVec2(p1.x, budget_y), kBudgetColor, 1.0f);
  draw->AddText(ImVec2(p0.x + 4, budget_y - ImGui::GetTextLineHeight()), kBudgetColor,
                cat(budget_ms, " ms budget").c_str());
  char scale[32];
  std::snprintf(scale, sizeof scale, "%.1f ms", top);
  draw->AddText(ImVec2(p0.x + 4, p0.y + 2), IM_COL32(200, 200, 200, 255), scale);
  ImGui::Dummy(ImVec2(width, height));
  ImGui::TextColored(ImColor(kIntervalColor), "frame interval");
  ImGui::SameLine();
  ImGui::TextColored(ImColor(kOpsColor), gpu ? "GPU time of the ops" : "CPU time of the ops");
}

// One bar as wide as the budget (or the frame, when over it), a segment per op type.
void stacked_bar(const std::vector<OpTypeRow>& rows, float budget_ms) {
  double total = 0;
  for (const OpTypeRow& r : rows) total += r.ms;
  const float width = ImGui::GetContentRegionAvail().x, height = 22.0f;
  const double scale = width / std::max<double>(budget_ms, total);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(p0, ImVec2(p0.x + width, p0.y + height), IM_COL32(40, 40, 46, 255));
  float x = p0.x;
  for (const OpTypeRow& r : rows) {
    const float w = float(r.ms * scale);
    draw->AddRectFilled(ImVec2(x, p0.y), ImVec2(x + w, p0.y + height), type_color(r.type));
    x += w;
  }
  const float budget_x = p0.x + float(budget_ms * scale);
  draw->AddLine(ImVec2(budget_x, p0.y - 3), ImVec2(budget_x, p0.y + height + 3), kBudgetColor, 2.0f);
  ImGui::Dummy(ImVec2(width, height));
  ImGui::Text("%.2f ms of %.0f ms budget (%.0f%%)", total, budget_ms, 100.0 * total / budget_ms);
}

void op_table(const std::vector<OpTypeRow>& rows, float budget_ms, const std::map<std::string, std::string>& impls) {
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("ops", 5, flags)) return;
  ImGui::TableSetupColumn("op");
  ImGui::TableSetupColumn("calls");
  ImGui::TableSetupColumn("ms");
  ImGui::TableSetupColumn("% budget");
  ImGui::TableSetupColumn("impl", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableHeadersRow();
  for (const OpTypeRow& r : rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextColored(ImColor(type_color(r.type)), "%s", r.type.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%d", r.calls);
    ImGui::TableNextColumn();
    ImGui::Text("%.3f", r.ms);
    ImGui::TableNextColumn();
    ImGui::Text("%.1f", 100.0 * r.ms / budget_ms);
    ImGui::TableNextColumn();
    const auto it = impls.find(r.type);
    ImGui::TextWrapped("%s", it == impls.end() ? "?" : it->second.c_str());
  }
  ImGui::EndTable();
}

}  // namespace

void draw_overlay(const Rect& area, const OverlayInfo& info, ControlsState& state) {
  if (area.w <= 0) return;
  begin_panel("Timing", area);
  const FrameStats& stats = *info.stats;
  ImGui::TextWrapped("%s", info.device.c_str());
  ImGui::TextWrapped("GL: %s", info.renderer.c_str());
  ImGui::TextWrapped("display: %s", info.display_path.c_str());
  ImGui::TextWrapped("%s", info.frame.c_str());
  if (const FrameRate r = stats.recent(); r.intervals > 0) {
    ImGui::TextWrapped("%s frames/s, %s ms per frame: both the mean interval between generated frames, over the "
                       "last %d (%s s)", three_digits(r.frames_per_s).c_str(), three_digits(r.ms).c_str(), r.intervals,
                       three_digits(r.seconds).c_str());
  } else {
    ImGui::TextUnformatted("frames/s: after two frames in a row");
  }
  ImGui::TextWrapped("%s", info.memory.c_str());
  ImGui::SetNextItemWidth(120);
  ImGui::InputFloat("budget ms", &state.budget_ms, 5.0f, 10.0f, "%.1f");
  state.budget_ms = std::max(state.budget_ms, 1.0f);
  ImGui::Checkbox("per-op timing", &state.profiling);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("events between the ops of every frame: costs GPU time");

  ImGui::Separator();
  history_plot(stats, state.budget_ms, info.gpu);

  ImGui::Separator();
  const FrameProfile& profile = info.profile->shown();
  if (!state.profiling) {
    ImGui::TextUnformatted("per-op timing is off");
  } else if (profile.frames() == 0) {
    ImGui::TextUnformatted("waiting for the first profiled frame");
  } else {
    std::string stages;
    char stage[64];
    for (const OpTypeRow& r : profile.by_stage()) {
      std::snprintf(stage, sizeof stage, "%s%s %.2f ms", stages.empty() ? "" : ", ", r.type.c_str(), r.ms);
      stages += stage;
    }
    ImGui::TextWrapped("%s time per frame by stage: %s", info.gpu ? "GPU" : "CPU", stages.c_str());
    const std::vector<OpTypeRow> rows = profile.by_type();
    ImGui::Text("by op type (mean of %d frames)", profile.frames());
    stacked_bar(rows, state.budget_ms);
    op_table(rows, state.budget_ms, *info.implementations);
    ImGui::Spacing();
    ImGui::TextUnformatted("slowest layers (ms per frame, summed over steps)");
    for (const auto& [layer, ms] : profile.slowest_layers(8)) ImGui::Text("%7.3f  %s", ms, layer.c_str());
  }
  ImGui::End();
}

void draw_view_badges(const Rect& view, const std::string& recording, bool paused) {
  ImDrawList* draw = ImGui::GetForegroundDrawList();
  ImVec2 at(float(view.x) + 12, float(view.y) + 12);
  if (!recording.empty()) {
    const float r = 7.0f, line = ImGui::GetTextLineHeight();
    draw->AddCircleFilled(ImVec2(at.x + r, at.y + line / 2), r, IM_COL32(230, 30, 30, 255));
    draw->AddText(ImVec2(at.x + 2 * r + 6, at.y), IM_COL32(255, 70, 60, 255), ("REC  " + recording).c_str());
    at.y += line + 6;
  }
  if (paused) draw->AddText(at, IM_COL32(255, 220, 90, 255), "PAUSED");
}

}  // namespace rtvd::gui
