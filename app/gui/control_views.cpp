#include "app/gui/control_views.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "app/gui/presenter.h"

namespace rtvd::gui {

void control_image_rgba(const std::vector<float>& image, int channels, std::vector<uint8_t>& rgba) {
  const size_t pixels = image.size() / size_t(channels);
  rgba.resize(pixels * 4);
  const auto byte = [](float v) { return std::isfinite(v) ? uint8_t(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f)) : 0; };
  for (size_t p = 0; p < pixels; ++p) {
    const float* v = &image[p * size_t(channels)];
    for (int c = 0; c < 3; ++c) rgba[p * 4 + size_t(c)] = byte(v[channels >= 3 ? c : 0]);
    rgba[p * 4 + 3] = 255;
  }
}

ControlViews::ControlViews(int nets, int width, int height) : textures_(size_t(nets)), width_(width), height_(height) {
  for (GLuint& t : textures_) {
    t = new_rgba8_texture(width, height);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
  }
}

ControlViews::~ControlViews() {
  if (!textures_.empty()) glDeleteTextures(GLsizei(textures_.size()), textures_.data());
}

void ControlViews::update(Engine& engine, double now_s) {
  if (textures_.empty() || now_s - last_s_ < kIntervalS || !engine.has_output()) return;
  last_s_ = now_s;
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  for (size_t k = 0; k < textures_.size(); ++k) {
    engine.read_control_image(k, image_);
    control_image_rgba(image_, int(image_.size() / (size_t(width_) * size_t(height_))), rgba_);
    glBindTexture(GL_TEXTURE_2D, textures_[k]);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width_, height_, GL_RGBA, GL_UNSIGNED_BYTE, rgba_.data());
  }
}

std::vector<void*> ControlViews::textures() const {
  std::vector<void*> out;
  for (GLuint t : textures_) out.push_back(reinterpret_cast<void*>(uintptr_t(t)));
  return out;
}

}  // namespace rtvd::gui
