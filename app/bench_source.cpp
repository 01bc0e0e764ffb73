#include "bench_source.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace rtvd {

namespace {

constexpr int kGridCells = 8;   // the picture's coarse colour grid, cells each way (a quarter frame each)
constexpr int kTexture = 24;    // the fine texture's amplitude, 8-bit levels either way

}  // namespace

BenchSource::BenchSource(int width, int height, int channels, bool moving)
    : width_(width), height_(height), channels_(channels), moving_(moving) {
  std::mt19937_64 rng{1};
  std::uniform_int_distribution<int> uniform(0, 255);
  if (!moving_) {
    fixed_.resize(size_t(width) * height * channels);
    for (uint8_t& v : fixed_) v = uint8_t(uniform(rng));
    return;
  }
  std::vector<float> grid(size_t(kGridCells) * kGridCells * channels);
  for (float& v : grid) v = float(uniform(rng));
  std::uniform_int_distribution<int> texture(-kTexture, kTexture);
  const int pw = 2 * width, ph = 2 * height;
  picture_.resize(size_t(pw) * ph * channels);
  // Bilinear between grid nodes, the last cell wrapping to the first: the picture tiles without a seam.
  const auto node = [&](int gy, int gx, int c) {
    return grid[(size_t(gy % kGridCells) * kGridCells + gx % kGridCells) * channels + c];
  };
  for (int y = 0; y < ph; ++y) {
    const float v = float(y) * kGridCells / float(ph);
    const int gy = int(v);
    const float fy = v - float(gy);
    for (int x = 0; x < pw; ++x) {
      const float u = float(x) * kGridCells / float(pw);
      const int gx = int(u);
      const float fx = u - float(gx);
      for (int c = 0; c < channels; ++c) {
        const float smooth = (1 - fy) * ((1 - fx) * node(gy, gx, c) + fx * node(gy, gx + 1, c)) +
                             fy * ((1 - fx) * node(gy + 1, gx, c) + fx * node(gy + 1, gx + 1, c));
        const float value = std::round(smooth) + float(texture(rng));
        picture_[(size_t(y) * pw + x) * channels + c] = uint8_t(std::clamp(value, 0.0f, 255.0f));
      }
    }
  }
}

std::vector<const std::vector<uint8_t>*> BenchSource::next(int n) {
  std::vector<const std::vector<uint8_t>*> images;
  if (int(windows_.size()) < n && moving_) windows_.resize(size_t(n));
  for (int i = 0; i < n; ++i, ++frame_) {
    if (!moving_) {
      images.push_back(&fixed_);
      continue;
    }
    window(frame_, windows_[size_t(i)]);
    images.push_back(&windows_[size_t(i)]);
  }
  return images;
}

// Row by row, each row in at most two pieces: the window's right part may wrap to the picture's left edge.
void BenchSource::window(int64_t frame, std::vector<uint8_t>& out) const {
  const int pw = 2 * width_, ph = 2 * height_;
  const int x0 = int(frame * kPanX % pw), y0 = int(frame * kPanY % ph);
  const size_t pixel = size_t(channels_);
  out.resize(size_t(width_) * height_ * pixel);
  const int first = std::min(width_, pw - x0);  // pixels before the wrap
  for (int r = 0; r < height_; ++r) {
    const uint8_t* row = picture_.data() + size_t((y0 + r) % ph) * pw * pixel;
    uint8_t* dst = out.data() + size_t(r) * width_ * pixel;
    std::memcpy(dst, row + size_t(x0) * pixel, size_t(first) * pixel);
    std::memcpy(dst + size_t(first) * pixel, row, size_t(width_ - first) * pixel);
  }
}

}  // namespace rtvd
