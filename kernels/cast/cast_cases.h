// cast's cases: the one table that the correctness tests (tests/ops/cast_test.cpp) and the kernel benchmark
// both run. Production shapes (the model input of a CFG batch: the default model's 64x64x3 frame and SD's
// 4x64x64 latents, two copies) and hostile ones (a ragged count, one element, a single copy, a misaligned y).
// Plain C++.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cast/cast.h"

namespace rtvd {

struct CastCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int64_t count = 0;
  int copies = 2;
  int y_misalign_bytes = 0;  // y starts this many bytes past a 16-byte boundary (the caller offsets it)
  bool production = false;
  std::string hostile = "";  // "" for none
};

const std::vector<CastCase>& cast_cases();

// The case's params over the caller's buffers: x (count) fp32, y (copies, count).
CastParams cast_params(const CastCase& c, const float* x, void* y);

}  // namespace rtvd
