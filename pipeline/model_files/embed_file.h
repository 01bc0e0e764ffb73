// Files compiled into the binary: .incbin places a file's bytes in .rodata at assembly time, 64-byte
// aligned (so a safetensors file reads like an mmap'd one). The .cpp that embeds a file lists it in its
// OBJECT_DEPENDS so CMake rebuilds it when the file changes.
#pragma once
#include <cstddef>
#include <string_view>

// At namespace scope: embeds `path` (a string literal) as rtvd_<name>_begin .. rtvd_<name>_end.
#define RTVD_EMBED_FILE(name, path)                                                                    \
  asm(".section .rodata\n.balign 64\nrtvd_" #name "_begin:\n.incbin \"" path "\"\nrtvd_" #name "_end:\n" \
      ".previous\n");                                                                                  \
  extern "C" const char rtvd_##name##_begin[], rtvd_##name##_end[]

// The bytes of a file embedded with RTVD_EMBED_FILE(name, ...).
#define RTVD_EMBEDDED(name) std::string_view(rtvd_##name##_begin, size_t(rtvd_##name##_end - rtvd_##name##_begin))
