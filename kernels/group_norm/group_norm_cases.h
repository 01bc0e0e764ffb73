// group_norm's cases: the one table that the correctness tests (tests/ops/group_norm_test.cpp) and the kernel
// benchmark both run. Production shapes (the SD U-Net's levels at batch 2 and 1, 32 groups: statistics alone,
// the pre-pass of a conv with the GroupNorm prologue, or with the normalise + SiLU pass, also in place) and
// hostile ones (c % 8 != 0, odd c, a single pixel, a ragged last chunk, a mean far from zero, a variance of
// the order of eps). Plain C++.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/group_norm/group_norm.h"

namespace rtvd {

struct GroupNormCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int n = 2, hw = 0, c = 0, groups = 32;
  bool silu = false;
  bool stats_only = false;  // y null: the statistics alone
  bool in_place = false;    // y = x
  float offset = 0.0f;      // added to x: a mean far from zero punishes E[x^2] - E[x]^2
  float stddev = 1.0f;      // of x: at 3e-3 the variance is of the order of eps
  bool production = false;
  std::string hostile = "";  // "" for none

  size_t elements() const { return size_t(n) * hw * c; }
  size_t stats() const { return size_t(n) * groups * 2; }
};

const std::vector<GroupNormCase>& group_norm_cases();

// The case's params over the caller's buffers: x and y (n, hw, c) (y ignored for statistics only, x in
// place), stats (n, groups, 2), gamma and beta (c).
GroupNormParams group_norm_params(const GroupNormCase& c, const void* x, void* y, float* stats, const float* gamma,
                                  const float* beta);

}  // namespace rtvd
