// linear on the GPU: y (m, n) = act(x (m, k) w (n, k)^T + bias) + residual, fp16 storage, fp32
// accumulation.
//
// Paths, chosen per call:
//   - cuBLASLt when k and n are multiples of 8 and x, w, y, residual, bias are 16-byte aligned (every
//     U-Net shape). Bias rides the CUBLASLT_EPILOGUE_BIAS epilogue; a residual without activation is
//     the GEMM's C operand (beta = 1, so y may alias it); SiLU (and a residual after it) is a second
//     pass over y.
//   - otherwise, or when cuBLASLt offers no algorithm, a simple tiled fp32-FMA kernel that serves any
//     shape and alignment, slower but exact in the same sense.
//
// cuBLASLt descriptors and its ranked algorithms are cached in a fixed table of 128 plans inside
// linear.cu, keyed by (m, n, k, bias/residual/activation flags, workspace size, SM version), built on
// the first call of each key (a heuristic query: do it before timing or graph capture); later calls
// allocate nothing and query nothing. A 129th distinct key throws. The table is guarded by a mutex, so
// launchers may be called from several host threads.
//
// Scratch: ctx.workspace is cuBLASLt's workspace. If this cuBLASLt takes bias only in the output type
// (fp16), its first 256-byte-aligned n * 2 bytes hold an fp16 copy of bias, written by a tiny kernel on
// each call. y may alias residual only without activation.
#pragma once
#include <string>
#include <vector>

#include "kernels/cuda_context.cuh"
#include "kernels/linear.h"

namespace rtvd {

// cuBLASLt's best-ranked algorithms for p's GEMM at ctx's workspace size (up to 8, its first choice
// first), each named by a text that linear() takes back: "cuBLASLt " and the algorithm's opaque bytes in
// hex, valid for this GPU and library version. Empty when p runs the fallback kernel. The backend times
// them on the layer's real operands (layer_tuner.h): on the H100 the first choice is up to 50% slower
// than the best for the U-Net's 8192-row GEMMs.
std::vector<std::string> linear_algorithms(const LinearParams& p, const CudaContext& ctx);

// Through `algorithm` when it names one that runs this GEMM within ctx's workspace, else through
// cuBLASLt's first choice (empty: always), so results are the same every run for the same name.
void linear(const LinearParams& p, const CudaContext& ctx, const std::string& algorithm = {});

}  // namespace rtvd
