// The ControlNet section's small views: each net's control image as its net read it (Engine::read_control_image:
// the Canny edges, the source or its own image) in a texture of its own, read a few times a second, not every
// frame, since a read waits for the frame.
#pragma once
#include <cstdint>
#include <vector>

#include "app/gui/gl.h"
#include "pipeline/engine.h"

namespace rtvd::gui {

// A control image (height, width, channels) in [0, 1] as RGBA8 pixels: one channel as grey, else its first three;
// a value that is not finite as 0.
void control_image_rgba(const std::vector<float>& image, int channels, std::vector<uint8_t>& rgba);

class ControlViews {
 public:
  static constexpr double kIntervalS = 0.25;

  // One width x height texture per net (needs the window's GL context).
  ControlViews(int nets, int width, int height);
  ~ControlViews();
  ControlViews(const ControlViews&) = delete;
  ControlViews& operator=(const ControlViews&) = delete;

  // Every net's image into its texture, when kIntervalS has passed since the last read (now_s: seconds).
  void update(Engine& engine, double now_s);
  // Each net's texture, as Dear ImGui takes it.
  std::vector<void*> textures() const;

 private:
  std::vector<GLuint> textures_;
  int width_, height_;
  double last_s_ = -1e9;
  std::vector<float> image_;
  std::vector<uint8_t> rgba_;
};

}  // namespace rtvd::gui
