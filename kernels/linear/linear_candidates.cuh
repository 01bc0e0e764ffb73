// linear's candidates (kernels/common/candidate.cuh): cuBLASLt's first choice ("cuBLASLt"), its other
// best-ranked algorithms for the GEMM (up to 7 more, "cuBLASLt <hex>", timed by the tuner: on the H100 the
// first choice is up to 50% slower than the best for the U-Net's 8192-row GEMMs), and rtvd's FMA fallback
// kernel for what cuBLASLt can't run (unaligned or ragged shapes). linear() (linear.cuh) runs the first that
// can.
#pragma once
#include <string>
#include <vector>

#include "kernels/common/candidate.cuh"
#include "kernels/linear/linear.h"

namespace rtvd {

using LinearCandidate = Candidate<LinearParams>;

// Asks cuBLASLt's heuristic once per shape (cached in linear.cu): call before timing or graph capture.
std::vector<LinearCandidate> linear_candidates(const LinearParams& p, const CudaContext& ctx);

// The GEMM of a linear layer (pointers ignored).
std::string linear_shape_key(const LinearParams& p);

}  // namespace rtvd
