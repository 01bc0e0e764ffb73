#include "app/gui/shaders.h"

#include "pipeline/model_files/embed_file.h"

RTVD_EMBED_FILE(present_vert, RTVD_SHADER_DIR "/present.vert");
RTVD_EMBED_FILE(present_frag, RTVD_SHADER_DIR "/present.frag");

namespace rtvd::gui {

std::string_view present_vertex_shader() {
  return RTVD_EMBEDDED(present_vert);
}

std::string_view present_fragment_shader() {
  return RTVD_EMBEDDED(present_frag);
}

}  // namespace rtvd::gui
