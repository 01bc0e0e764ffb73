// The timing overlay: frame-time history against the budget, frames/s, per-op-type time as bars stacked
// against the budget with the implementation of each type, the slowest layers, memory, device and display
// path. Numbers come from the profiler (FrameStats, RollingProfile); nothing here measures.
#pragma once
#include <map>
#include <string>

#include "app/gui/controls.h"
#include "app/gui/frame_stats.h"
#include "app/gui/layout.h"

namespace rtvd::gui {

struct OverlayInfo {
  std::string device;        // the backend's describe()
  std::string renderer;      // GL_RENDERER, GL_VERSION
  std::string display_path;  // the FrameUpload's name
  std::string memory;        // one line
  std::string frame;         // "64x64, 4 steps, noise walk"
  bool gpu = false;          // op times are GPU times (else CPU)
  const FrameStats* stats = nullptr;
  const RollingProfile* profile = nullptr;
  const std::map<std::string, std::string>* implementations = nullptr;  // by op type
};

// Edits state.budget_ms and state.profiling.
void draw_overlay(const Rect& area, const OverlayInfo& info, ControlsState& state);

// Over the frame's view: a red REC with what is being recorded, and PAUSED.
void draw_view_badges(const Rect& view, const std::string& recording, bool paused);

}  // namespace rtvd::gui
