// A host RGBA8 frame: what the pipeline hands to recorders, screenshots and host-upload display.
#pragma once
#include <cstdint>
#include <vector>

namespace rtvd {

struct ImageRgba8 {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // (height, width, 4) row-major
};

}  // namespace rtvd
