#include "app/gui/window.h"

#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <cstring>
#include <utility>

#include "app/gui/gl.h"
#include "app/gui/gui_options.h"
#include "base/error.h"

namespace rtvd::gui {

namespace {

// GLFW reports errors through a callback without user data; the last one explains a failed call.
std::string g_glfw_error;
void on_glfw_error(int, const char* description) { g_glfw_error = description; }

}  // namespace

Window::Window(int width, int height, const std::string& title, bool vsync) {
  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) fail("cannot start GLFW: ", g_glfw_error, "; 'rtvd render' renders headless to a file");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  window_ = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
  if (!window_) {
    const std::string why = g_glfw_error;
    glfwTerminate();
    fail("cannot open an OpenGL 3.3 core window: ", why, "; 'rtvd render' renders headless to a file");
  }
  glfwSetWindowSizeLimits(window_, kMinWindowWidth, kMinWindowHeight, GLFW_DONT_CARE, GLFW_DONT_CARE);
  glfwMakeContextCurrent(window_);
  // Past the driver's largest viewport GL would draw into a corner of the window: refuse it instead.
  GLint max_viewport[2] = {0, 0};
  glGetIntegerv(GL_MAX_VIEWPORT_DIMS, max_viewport);
  if (const Size fb = framebuffer_size(); fb.w > max_viewport[0] || fb.h > max_viewport[1]) {
    glfwDestroyWindow(window_);
    glfwTerminate();
    fail("a ", fb.w, "x", fb.h, " window is larger than this OpenGL draws (at most ", max_viewport[0], "x",
         max_viewport[1], "); give a smaller --window");
  }
  glfwSwapInterval(vsync ? 1 : 0);
  glfwSetWindowUserPointer(window_, this);
  glfwSetKeyCallback(window_, on_key);  // before ImGui's backend, which chains to it

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed: no imgui.ini left in the working directory
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
}

Window::~Window() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  glfwTerminate();
}

bool Window::should_close() const { return glfwWindowShouldClose(window_); }
void Window::close() { glfwSetWindowShouldClose(window_, GLFW_TRUE); }

bool Window::minimised() const {
  const Size fb = framebuffer_size();
  return glfwGetWindowAttrib(window_, GLFW_ICONIFIED) || fb.w == 0 || fb.h == 0;
}

void Window::wait_events(double timeout_s) const { glfwWaitEventsTimeout(timeout_s); }
void Window::poll_events() const { glfwPollEvents(); }

Window::Size Window::size() const {
  Size s;
  glfwGetWindowSize(window_, &s.w, &s.h);
  return s;
}

Window::Size Window::framebuffer_size() const {
  Size s;
  glfwGetFramebufferSize(window_, &s.w, &s.h);
  return s;
}

std::string Window::renderer() const {
  return cat(reinterpret_cast<const char*>(glGetString(GL_RENDERER)), ", OpenGL ",
             reinterpret_cast<const char*>(glGetString(GL_VERSION)));
}

void Window::on_key(GLFWwindow* window, int key, int, int action, int mods) {
  if (action != GLFW_PRESS) return;
  auto* self = static_cast<Window*>(glfwGetWindowUserPointer(window));
  self->key_presses_.push_back({key, (mods & GLFW_MOD_CONTROL) != 0});
}

std::vector<Window::KeyPress> Window::take_key_presses() { return std::exchange(key_presses_, {}); }

bool Window::typing() const { return ImGui::GetIO().WantTextInput; }

void Window::begin_frame() {
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGui::NewFrame();
}

void Window::end_frame() {
  ImGui::Render();
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void Window::swap() { glfwSwapBuffers(window_); }

ImageRgba8 Window::read_pixels() const {
  ImageRgba8 image;
  const Size fb = framebuffer_size();
  image.width = fb.w;
  image.height = fb.h;
  const size_t row = size_t(image.width) * 4;
  std::vector<uint8_t> bottom_up(row * image.height);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, image.width, image.height, GL_RGBA, GL_UNSIGNED_BYTE, bottom_up.data());
  image.pixels.resize(bottom_up.size());
  for (int y = 0; y < image.height; ++y)  // GL's rows start at the bottom
    std::memcpy(&image.pixels[y * row], &bottom_up[(image.height - 1 - y) * row], row);
  for (size_t i = 3; i < image.pixels.size(); i += 4) image.pixels[i] = 255;
  return image;
}

}  // namespace rtvd::gui
