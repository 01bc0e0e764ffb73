// canny's case table (canny_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/canny/canny_cases.h"

namespace rtvd {

const std::vector<CannyCase>& canny_cases() {
  static const std::vector<CannyCase> cases = {
      {.name = "source_512x512", .h = 512, .w = 512, .production = true},
      {.name = "source_1024x1024", .h = 1024, .w = 1024, .production = true},
      {.name = "group2_512x512", .n = 2, .h = 512, .w = 512, .production = true},
      {.name = "odd_37x53", .h = 37, .w = 53, .low = 50, .high = 150, .hostile = "odd sizes, not a tile's multiple"},
      {.name = "group3_odd_65x31", .n = 3, .h = 65, .w = 31, .low = 30, .high = 90, .hostile = "images side by side"},
      {.name = "one_pixel", .h = 1, .w = 1, .low = 0, .high = 0, .hostile = "every neighbour outside"},
      {.name = "one_row", .h = 1, .w = 97, .low = 20, .high = 60, .hostile = "rows above and below replicated"},
      {.name = "one_column", .h = 61, .w = 1, .low = 20, .high = 60, .hostile = "columns replicated"},
      {.name = "gray_c1", .h = 48, .w = 64, .c = 1, .low = 40, .high = 120, .hostile = "one channel"},
      {.name = "rgba_c4", .h = 29, .w = 33, .c = 4, .low = 60, .high = 180, .hostile = "four channels"},
      {.name = "equal_thresholds", .h = 40, .w = 40, .low = 80, .high = 80, .hostile = "no weak pixels"},
      {.name = "zero_low", .h = 45, .w = 38, .low = 0, .high = 30, .hostile = "every peak a candidate"},
      {.name = "high_above_max", .h = 32, .w = 32, .low = 10, .high = 3000, .hostile = "no strong pixel: no edge"},
      {.name = "negative_low", .h = 30, .w = 30, .low = -20, .high = 40, .hostile = "a threshold below 0"},
      {.name = "swapped", .h = 36, .w = 44, .low = 150, .high = 50, .hostile = "low > high: swapped, as cv::Canny"},
  };
  return cases;
}

CannyParams canny_params(const CannyCase& c, const float* x, const int32_t* thresholds, float* y, void* workspace) {
  CannyParams p;
  p.x = x, p.thresholds = thresholds, p.y = y, p.workspace = workspace;
  p.n = c.n, p.h = c.h, p.w = c.w, p.c = c.c;
  return p;
}

}  // namespace rtvd
