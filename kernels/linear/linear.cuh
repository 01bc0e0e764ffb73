// linear on the GPU: y (m, n) = act(x (m, k) w (n, k)^T + bias) + residual, fp16 storage, fp32
// accumulation.
//
// Paths (its candidates, linear_candidates.cuh):
//   - cuBLASLt when k and n are multiples of 8 and x, w, y, residual, bias are 16-byte aligned (every
//     U-Net shape). Bias rides the CUBLASLT_EPILOGUE_BIAS epilogue; a residual without activation is
//     the GEMM's C operand (beta = 1, so y may alias it); an activation (and a residual after it) is a
//     second pass over y. Not cuBLASLt's GELU epilogues: they compute the tanh approximation, and
//     linear's Gelu is the exact, erf-based one.
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
// (fp16), it reads p.bias_act where given; else its first 256-byte-aligned n * 2 bytes hold an fp16 copy of
// bias, written by a tiny kernel on each call. y may alias residual only without activation.
#pragma once
#include <string>
#include <vector>

#include "kernels/common/cuda_context.cuh"
#include "kernels/linear/linear.h"

namespace rtvd {

// cuBLASLt's best-ranked algorithms for p's GEMM at ctx's workspace size (up to 8, its first choice
// first), each named by a text that linear_cublaslt() takes back: "cuBLASLt " and the algorithm's opaque
// bytes in hex, valid for this GPU and library version. Empty when cuBLASLt can't run p.
std::vector<std::string> linear_algorithms(const LinearParams& p, const CudaContext& ctx);

// y = linear.h's function of p on ctx.stream: the op's one entry point, which runs its default candidate
// (linear_candidates.cuh: cuBLASLt's first choice where it can run p, else the fallback kernel).
void linear(const LinearParams& p, const CudaContext& ctx);

// Whether cuBLASLt runs p: more than 8 rows (fewer are a matrix-vector product, faster in the fallback's one
// launch), k and n multiples of 8, 16-byte aligned operands, and an algorithm at ctx's workspace size.
bool linear_cublaslt_can_implement(const LinearParams& p, const CudaContext& ctx, std::string* why = nullptr);
// Through `algorithm` when it names one that runs this GEMM within ctx's workspace, else through
// cuBLASLt's first choice (empty: always), so results are the same every run for the same name. Throws where
// linear_cublaslt_can_implement() is false.
void linear_cublaslt(const LinearParams& p, const CudaContext& ctx, const std::string& algorithm = {});
// rtvd's tiled fp32-FMA kernel: any shape and alignment, slower.
void linear_fallback(const LinearParams& p, const CudaContext& ctx);

}  // namespace rtvd
