// Where things go in the window: the controls panel on the left, the stats overlay on the right, the frame
// fitted (aspect-correct, centred) into the view between them. Plain math in window coordinates (origin
// top-left); header-only so the end-to-end test can find the frame in a screenshot in any build.
#pragma once
#include <algorithm>
#include <cmath>

namespace rtvd::gui {

struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
  bool operator==(const Rect&) const = default;
};

// The largest rect of the image's aspect ratio inside area, centred; zero-sized when either is empty.
inline Rect fit_rect(int image_w, int image_h, const Rect& area) {
  if (image_w <= 0 || image_h <= 0 || area.w <= 0 || area.h <= 0) return {area.x, area.y, 0, 0};
  const double scale = std::min(double(area.w) / image_w, double(area.h) / image_h);
  const int w = std::clamp(int(std::lround(image_w * scale)), 1, area.w);
  const int h = std::clamp(int(std::lround(image_h * scale)), 1, area.h);
  return {area.x + (area.w - w) / 2, area.y + (area.h - h) / 2, w, h};
}

// Panel widths; on a narrow window each panel takes at most a third, so the frame stays visible.
constexpr int kControlsWidth = 300;
constexpr int kOverlayWidth = 380;

struct Layout {
  Rect controls, overlay;  // zero-sized when hidden
  Rect view;               // the area between the panels
  Rect frame;              // the frame inside the view
};

inline Layout layout_window(int width, int height, bool show_controls, bool show_overlay, int image_w, int image_h) {
  Layout l;
  const int controls = show_controls ? std::min(kControlsWidth, width / 3) : 0;
  const int overlay = show_overlay ? std::min(kOverlayWidth, width / 3) : 0;
  l.controls = {0, 0, controls, controls ? height : 0};
  l.overlay = {width - overlay, 0, overlay, overlay ? height : 0};
  l.view = {controls, 0, std::max(width - controls - overlay, 0), height};
  l.frame = fit_rect(image_w, image_h, l.view);
  return l;
}

}  // namespace rtvd::gui
