// Passes over a built graph that backends use to run it faster, the ops themselves unchanged.
#pragma once
#include <vector>

#include "pipeline/graph/graph.h"

namespace rtvd {

// Statistics-only GroupNorms read by exactly one later conv of the same list, which normalises the same x
// with the same groups: when that conv takes its prologue as a pass of its own (cuDNN, wgmma), the pass
// can compute the statistics in the launch that normalises, and the norm op is skipped. Per op of `ops`:
// for such a GroupNorm the index of its conv, for such a conv the index of its GroupNorm, else -1.
std::vector<int> fusable_norm_pairs(std::vector<Op>& ops);

}  // namespace rtvd
