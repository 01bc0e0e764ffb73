// Draws the frame: an RGBA8 texture of the engine's size, placed into the frame's rect by the present
// shaders (shaders/present.vert, .frag), scaled with nearest or linear filtering. Needs the GL context.
#pragma once
#include "app/gui/layout.h"
#include "pipeline/io/image.h"

namespace rtvd::gui {

// A width x height RGBA8 texture (contents undefined), edges clamped, no mipmaps, bound to GL_TEXTURE_2D: the
// frame's and the ControlNet views'. The caller deletes it.
unsigned new_rgba8_texture(int width, int height);

class Presenter {
 public:
  Presenter(int width, int height);  // Error with GL's log if the shaders do not compile or link
  ~Presenter();
  Presenter(const Presenter&) = delete;
  Presenter& operator=(const Presenter&) = delete;

  unsigned texture() const { return texture_; }  // a GL texture name, for interop registration
  int width() const { return width_; }
  int height() const { return height_; }

  void upload(const ImageRgba8& image);  // host path: the image into the texture
  // Clears the framebuffer (fb_width x fb_height pixels) and draws the texture into frame, given in
  // framebuffer pixels with the origin at the top left.
  void draw(const Rect& frame, int fb_width, int fb_height, bool linear) const;

 private:
  int width_, height_;
  unsigned texture_ = 0, program_ = 0, vertex_array_ = 0;
  int rect_uniform_ = -1, frame_uniform_ = -1;
};

}  // namespace rtvd::gui
