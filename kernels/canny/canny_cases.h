// canny's cases: the one table that the correctness tests (tests/ops/canny_test.cpp) and `rtvd bench kernels`
// run. Production shapes (a 512x512 and a 1024x1024 source, a stream batch's group of two) and hostile ones (odd
// sizes, a pixel, a row, a column, one and four channels, thresholds equal, at 0, below 0, above every magnitude, swapped). The
// tests draw each case's images (noise, soft shapes, flat regions). Plain C++.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/canny/canny.h"

namespace rtvd {

struct CannyCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int n = 1, h = 0, w = 0, c = 3;
  int low = 100, high = 200;
  bool production = false;
  std::string hostile = "";  // "" for none
  int64_t pixels() const { return int64_t(n) * h * w; }
};

const std::vector<CannyCase>& canny_cases();

// The case's params over the caller's buffers: x (n, h, w, c), thresholds (2) holding the case's low and high,
// y (n, h, w, 3), workspace of canny_workspace_bytes.
CannyParams canny_params(const CannyCase& c, const float* x, const int32_t* thresholds, float* y, void* workspace);

}  // namespace rtvd
