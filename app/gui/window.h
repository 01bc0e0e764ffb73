// The GLFW window: an OpenGL 3.3 core context with Dear ImGui on it (Debian's libimgui: its GLFW and
// OpenGL3 backends). One per process; everything GL lives while it does.
#pragma once
#include <string>
#include <vector>

#include "pipeline/io/image.h"

struct GLFWwindow;

namespace rtvd::gui {

class Window {
 public:
  // Error with GLFW's reason when there is no display or no OpenGL 3.3 core context.
  Window(int width, int height, const std::string& title, bool vsync);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  bool should_close() const;
  void close();
  // Iconified, or a zero-sized framebuffer: nothing to draw, the loop should sleep in wait_events().
  bool minimised() const;
  void wait_events(double timeout_s) const;  // sleeps until input or timeout
  void poll_events() const;

  struct Size {
    int w = 0, h = 0;
  };
  Size size() const;              // in screen coordinates (ImGui's units)
  Size framebuffer_size() const;  // in pixels (GL's units); differs from size() on HiDPI screens
  std::string renderer() const;   // "llvmpipe (LLVM 15.0.6, 256 bits), OpenGL 4.5 (Core Profile) Mesa 22.3.6"

  struct KeyPress {
    int key;    // GLFW key code
    bool ctrl;  // with Ctrl held
  };
  // Keys pressed since the last call, oldest first. Kept by a callback rather than read from ImGui's
  // key state (which in 1.86 only sees keys down at a new frame), so a tap shorter than a frame is not
  // lost when frames are slow (a CPU frame takes a quarter of a second).
  std::vector<KeyPress> take_key_presses();
  bool typing() const;  // a text field has the keyboard: keys are text, not shortcuts

  void begin_frame();  // ImGui's new frame
  void end_frame();    // ImGui's draw data into the back buffer, over what was drawn before
  void swap();
  // The back buffer as drawn so far (call after end_frame, before swap): top row first, opaque.
  ImageRgba8 read_pixels() const;

 private:
  static void on_key(GLFWwindow* window, int key, int scancode, int action, int mods);

  GLFWwindow* window_ = nullptr;
  std::vector<KeyPress> key_presses_;
};

}  // namespace rtvd::gui
