// The source of rtvd bench frames' img2img frames, 8-bit RGB as a video source gives them (FrameSource::next):
// one fixed random image (a still camera), or with --moving a camera panning over a picture.
#pragma once
#include <cstdint>
#include <vector>

namespace rtvd {

class BenchSource {
 public:
  // Each pan step moves the window this far over the picture (right, down), in pixels.
  static constexpr int kPanX = 2, kPanY = 1;

  // (height, width, channels) images, seeded, the same every run. moving false: one image of uniform random
  // bytes, every frame. moving true: frame t is the window at (kPanX t, kPanY t) onto a smooth random picture
  // twice the frame's size each way (a coarse grid of random colours, bilinearly upsampled, plus a fine
  // texture) that tiles seamlessly, so the window wraps around it and any number of frames pans on.
  BenchSource(int width, int height, int channels, bool moving);

  bool moving() const { return moving_; }
  // The images of the next n frames, made here (outside the timed steps that take them); valid until the next
  // call. A pan's windows are copied into buffers kept for reuse.
  std::vector<const std::vector<uint8_t>*> next(int n);
  // The next frame is frame 0 again.
  void rewind() { frame_ = 0; }

 private:
  int width_, height_, channels_;
  bool moving_;
  std::vector<uint8_t> fixed_;    // the still source's image
  std::vector<uint8_t> picture_;  // the pan's picture, (2 height, 2 width, channels)
  std::vector<std::vector<uint8_t>> windows_;
  int64_t frame_ = 0;  // the next frame's index

  void window(int64_t frame, std::vector<uint8_t>& out) const;
};

}  // namespace rtvd
