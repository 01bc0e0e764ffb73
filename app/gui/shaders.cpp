#include "app/gui/shaders.h"

// .incbin places the files' bytes in .rodata at assembly time; CMake rebuilds this file when they change.
asm(".section .rodata\n"
    "rtvd_present_vert_begin:\n"
    ".incbin \"" RTVD_SHADER_DIR "/present.vert\"\n"
    "rtvd_present_vert_end:\n"
    "rtvd_present_frag_begin:\n"
    ".incbin \"" RTVD_SHADER_DIR "/present.frag\"\n"
    "rtvd_present_frag_end:\n"
    ".previous\n");

extern "C" const char rtvd_present_vert_begin[], rtvd_present_vert_end[];
extern "C" const char rtvd_present_frag_begin[], rtvd_present_frag_end[];

namespace rtvd::gui {

std::string_view present_vertex_shader() {
  return {rtvd_present_vert_begin, size_t(rtvd_present_vert_end - rtvd_present_vert_begin)};
}

std::string_view present_fragment_shader() {
  return {rtvd_present_frag_begin, size_t(rtvd_present_frag_end - rtvd_present_frag_begin)};
}

}  // namespace rtvd::gui
