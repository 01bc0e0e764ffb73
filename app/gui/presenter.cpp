#include "app/gui/presenter.h"

#include <string>
#include <string_view>

#include "app/gui/gl.h"
#include "app/gui/shaders.h"
#include "base/error.h"

namespace rtvd::gui {

namespace {

// Throws with GL's log when a shader did not compile or a program did not link. get_iv and get_log are
// the matching pair (glGetShaderiv + glGetShaderInfoLog, or the Program ones). Failing here ends the run,
// so the object is not deleted first.
void check_status(GLuint object, GLenum status, decltype(&glGetShaderiv) get_iv,
                  decltype(&glGetShaderInfoLog) get_log, const std::string& what) {
  GLint ok = 0;
  get_iv(object, status, &ok);
  if (ok) return;
  char log[2048] = {};
  get_log(object, sizeof log, nullptr, log);
  fail(what, ": ", log);
}

GLuint compile(GLenum kind, std::string_view source, const char* name) {
  const GLuint shader = glCreateShader(kind);
  const GLchar* text = source.data();
  const GLint length = GLint(source.size());
  glShaderSource(shader, 1, &text, &length);
  glCompileShader(shader);
  check_status(shader, GL_COMPILE_STATUS, glGetShaderiv, glGetShaderInfoLog,
               cat("shaders/", name, " does not compile"));
  return shader;
}

GLuint link_present_program() {
  const GLuint vertex = compile(GL_VERTEX_SHADER, present_vertex_shader(), "present.vert");
  const GLuint fragment = compile(GL_FRAGMENT_SHADER, present_fragment_shader(), "present.frag");
  const GLuint program = glCreateProgram();
  glAttachShader(program, vertex);
  glAttachShader(program, fragment);
  glLinkProgram(program);
  glDeleteShader(vertex);  // flagged for deletion; freed with the program
  glDeleteShader(fragment);
  check_status(program, GL_LINK_STATUS, glGetProgramiv, glGetProgramInfoLog,
               "shaders/present.vert + present.frag do not link");
  return program;
}

}  // namespace

unsigned new_rgba8_texture(int width, int height) {
  GLuint texture = 0;
  glGenTextures(1, &texture);
  glBindTexture(GL_TEXTURE_2D, texture);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAX_LEVEL, 0);
  return texture;
}

Presenter::Presenter(int width, int height) : width_(width), height_(height) {
  program_ = link_present_program();
  rect_uniform_ = glGetUniformLocation(program_, "u_rect");
  frame_uniform_ = glGetUniformLocation(program_, "u_frame");
  glGenVertexArrays(1, &vertex_array_);  // core profile draws need a bound vertex array, even an empty one
  texture_ = new_rgba8_texture(width, height);
}

Presenter::~Presenter() {
  glDeleteTextures(1, &texture_);
  glDeleteVertexArrays(1, &vertex_array_);
  glDeleteProgram(program_);
}

void Presenter::upload(const ImageRgba8& image) {
  if (image.width != width_ || image.height != height_)
    fail("frame is ", image.width, "x", image.height, ", the display texture ", width_, "x", height_);
  glBindTexture(GL_TEXTURE_2D, texture_);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width_, height_, GL_RGBA, GL_UNSIGNED_BYTE, image.pixels.data());
}

void Presenter::draw(const Rect& frame, int fb_width, int fb_height, bool linear) const {
  glViewport(0, 0, fb_width, fb_height);
  glDisable(GL_SCISSOR_TEST);
  glDisable(GL_BLEND);
  glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  if (frame.w <= 0 || frame.h <= 0) return;

  // Pixels (origin top left) to clip space (origin centre, y up).
  const float left = 2.0f * frame.x / fb_width - 1.0f;
  const float right = 2.0f * (frame.x + frame.w) / fb_width - 1.0f;
  const float top = 1.0f - 2.0f * frame.y / fb_height;
  const float bottom = 1.0f - 2.0f * (frame.y + frame.h) / fb_height;
  glUseProgram(program_);
  glUniform4f(rect_uniform_, left, bottom, right, top);
  glUniform1i(frame_uniform_, 0);
  glActiveTexture(GL_TEXTURE0);
  glBindTexture(GL_TEXTURE_2D, texture_);
  const GLint filter = linear ? GL_LINEAR : GL_NEAREST;
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, filter);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, filter);
  glBindVertexArray(vertex_array_);
  glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
  glBindVertexArray(0);
  glUseProgram(0);
}

}  // namespace rtvd::gui
