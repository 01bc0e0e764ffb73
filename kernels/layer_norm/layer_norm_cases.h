// layer_norm's cases: the one table that the correctness tests (tests/ops/layer_norm_test.cpp) and the kernel
// benchmark both run. Production shapes (the SD 2.1 transformer's norms at its three attention levels, batch
// 2) and hostile ones (rows wider than the register path holds, c % 8 != 0, 2-byte aligned rows, one
// channel, a mean far from zero). Plain C++.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/layer_norm/layer_norm.h"

namespace rtvd {

struct LayerNormCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int rows = 0, c = 0;
  float offset = 0.0f;     // added to x
  float stddev = 2.0f;     // of x
  int misalign_bytes = 0;  // x and y start this many bytes past a 16-byte boundary (the caller offsets them)
  bool production = false;
  std::string hostile = "";  // "" for none

  size_t elements() const { return size_t(rows) * c; }
};

const std::vector<LayerNormCase>& layer_norm_cases();

// The case's params over the caller's buffers: x and y (rows, c), gamma and beta (c).
LayerNormParams layer_norm_params(const LayerNormCase& c, const void* x, void* y, const float* gamma,
                                  const float* beta);

}  // namespace rtvd
