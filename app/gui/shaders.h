// The GLSL of shaders/, embedded in the binary at build time: a build runs without the source tree.
#pragma once
#include <string_view>

namespace rtvd::gui {

std::string_view present_vertex_shader();
std::string_view present_fragment_shader();

}  // namespace rtvd::gui
