// conv2d's candidates (kernels/common/candidate.cuh), best-ranked first: the stem kernel where c_in <= 3
// (conv2d_stem.cuh), the narrow kernel where c_out <= 8 (conv2d_narrow.cuh), the wgmma/TMA kernel's six best-ranked tiles (sm_90a builds on an H100), the mma.sync
// implicit GEMM's config for the shape (and, where no wgmma tile applies, every other config and split-K
// factor), the direct kernel where the implicit GEMM can't load the input, and cuDNN with our epilogue pass
// and with its own fused epilogue (where the epilogue is of its form). conv2d() (conv2d.cuh) runs the first
// that can.
#pragma once
#include <vector>

#include "kernels/common/candidate.cuh"
#include "kernels/conv2d/conv2d.h"
#include "kernels/group_norm/group_norm.h"

namespace rtvd {

struct Conv2dCandidate : Candidate<Conv2dParams, const GroupNormParams*> {
  // Applies the GroupNorm prologue as a pass of its own (conv2d_prepass.cuh: wgmma, cuDNN), which can then
  // compute the statistics too: run()'s norm may be the statistics-only GroupNorm whose output p.gn_stats is
  // (the caller skips that op). Candidates without it take null.
  bool takes_prepass = false;
};

// Names: "custom narrow", "custom wgmma 128x160", "custom igemm128x160 split-k 2", "custom direct", "cuDNN",
// "cuDNN fused" (the tuning cache keeps them). Pointers in p matter only to can_implement's alignment checks.
std::vector<Conv2dCandidate> conv2d_candidates(const Conv2dParams& p, const CudaContext& ctx);

// The shape and fused parts of a conv that decide which candidate is fastest (pointers ignored): the
// tuning cache's key.
std::string conv2d_shape_key(const Conv2dParams& p);

}  // namespace rtvd
