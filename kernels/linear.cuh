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
// cuBLASLt descriptors and the chosen algorithm are cached in a fixed table of 128 plans inside
// linear.cu, keyed by (m, n, k, bias/residual/activation flags, workspace size, SM version), built on
// the first call of each key (a heuristic query: do it before timing or graph capture); later calls
// allocate nothing and query nothing. With ctx.tune_linears that first call also times cuBLASLt's 8
// best-ranked algorithms on the call's own operands (CUDA graphs of the GEMM, replayed; y is overwritten
// first, then computed) and keeps the fastest, remembered for plans of the same GEMM with another
// workspace size. The choice can then differ between processes (results within fp16 rounding); without
// tune_linears the heuristic's first choice runs, the same every time. A 129th distinct key throws. The table is guarded by a mutex, so
// launchers may be called from several host threads.
//
// Scratch: ctx.workspace is cuBLASLt's workspace. If this cuBLASLt takes bias only in the output type
// (fp16), its first 256-byte-aligned n * 2 bytes hold an fp16 copy of bias, written by a tiny kernel on
// each call. y may alias residual only without activation.
#pragma once
#include "kernels/cuda_context.cuh"
#include "kernels/linear.h"

namespace rtvd {

void linear(const LinearParams& p, const CudaContext& ctx);

}  // namespace rtvd
