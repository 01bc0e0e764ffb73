// conv2d on the CPU: im2col + OpenBLAS sgemm, fp32, NHWC activations and OHWI weights; the OpenMP threads
// share out each chunk's gather and then its GEMM in pieces (kernels/common/cpu_threading.h).
// The GEMM is y(M = n h_out w_out, c_out) = cols(M, K = kh kw c_in) * w^T: OHWI weights already are
// (c_out, K) row-major with K ordered (ky, kx, c) like an im2col row, so nothing is repacked.
// Workspace, in this order: with the GroupNorm+SiLU prologue, pre(x) (computed once, so that each input
// element is normalised once rather than kh kw times) and its per-channel coefficients; then one chunk
// of im2col rows.
// A 1x1, stride 1, unpadded conv needs no im2col: the GEMM reads x (or pre(x)) itself.
// Padding: p.pad zeros before the first row and column, and after the last as many as h_out and w_out reach
// (one more than p.pad for diffusers' Downsample2D): im2col writes zeros for every tap outside the input.
#include "kernels/conv2d/conv2d.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/common/cpu_cancel.h"
#include "kernels/common/cpu_gemm.h"
#include "kernels/common/cpu_threading.h"
#include "kernels/common/cpu_vector_math.h"

namespace rtvd {
namespace {

// im2col rows gathered per GEMM: as many as fit kChunkFloats, which bounds the workspace, but at least
// kMinChunkRows, so that each thread's sgemm call amortises packing all of w. The rows are then spread
// evenly over the chunks, so that the last chunk is not a sliver.
constexpr int64_t kChunkFloats = int64_t(1) << 21;  // 8 MiB
constexpr int64_t kMinChunkRows = 512;
constexpr int64_t kParallelMacs = int64_t(1) << 18;
constexpr int64_t kGatherRows = 64;  // im2col rows per block of the gather (~50-200 KiB)

struct Plan {
  int64_t m = 0, k = 0;        // GEMM rows (output pixels) and depth
  int64_t prologue = 0;        // floats of pre(x) and its coefficients; 0 without the prologue
  int64_t chunk_rows = 0;      // im2col rows per GEMM; 0 when the GEMM reads its input directly
  size_t workspace_bytes() const { return sizeof(float) * size_t(prologue + chunk_rows * k); }
};

Plan plan_for(const Conv2dParams& p) {
  Plan plan;
  plan.m = int64_t(p.n) * p.h_out * p.w_out;
  plan.k = int64_t(p.kh) * p.kw * p.c_in;
  if (p.gn_stats) plan.prologue = int64_t(p.n) * (int64_t(p.h) * p.w + 2) * p.c_in;
  const bool pointwise = p.kh == 1 && p.kw == 1 && p.stride == 1 && p.pad == 0 && p.h_out == p.h && p.w_out == p.w;
  if (!pointwise) {
    const int64_t most = std::max(kMinChunkRows, kChunkFloats / std::max<int64_t>(plan.k, 1));
    const int64_t chunks = std::max<int64_t>((plan.m + most - 1) / most, 1);
    plan.chunk_rows = (plan.m + chunks - 1) / chunks;
  }
  return plan;
}

// out (n, h, w, c_in) = silu((x - mean[n, g]) * rstd[n, g] * gamma[c] + beta[c]). The group statistics
// are first spread to per-channel rows (mean, rstd * gamma) in coeffs (n, 2, c_in): groups are as
// narrow as 2 channels, too short a loop to vectorise, whereas a whole pixel row is one simd loop.
void apply_prologue(const Conv2dParams& p, const float* x, float* out, float* coeffs) {
  const int64_t pixels = int64_t(p.n) * p.h * p.w, hw = int64_t(p.h) * p.w;
  const int c = p.c_in, per_group = p.c_in / p.gn_groups;
  for (int image = 0; image < p.n; ++image)
    for (int i = 0; i < c; ++i) {
      const float* stats = p.gn_stats + (int64_t(image) * p.gn_groups + i / per_group) * 2;
      coeffs[(2 * image) * c + i] = stats[0];
      coeffs[(2 * image + 1) * c + i] = stats[1] * p.gn_gamma[i];
    }
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(c)) if (pixels * c >= cpu::kParallelElements)
  for (int64_t px = 0; px < pixels; ++px) {
    const float* mean = coeffs + 2 * (px / hw) * c;
    const float* scale = mean + c;
    const float* xr = x + px * c;
    float* yr = out + px * c;
#pragma omp simd
    for (int i = 0; i < c; ++i) yr[i] = cpu::silu_fast((xr[i] - mean[i]) * scale[i] + p.gn_beta[i]);
  }
}

// Rows [row0, row0 + rows) of the im2col matrix into cols, by the calling thread. For each kernel row ky
// the in-bounds taps kx are adjacent pixels of one input row, so they are one memcpy; padded taps are 0.
void im2col(const Conv2dParams& p, const float* src, int64_t row0, int64_t rows, float* cols) {
  const int64_t hw_out = int64_t(p.h_out) * p.w_out, k = int64_t(p.kh) * p.kw * p.c_in;
  const int64_t tap_row = int64_t(p.kw) * p.c_in;  // floats per kernel row
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = row0 + r, image = m / hw_out;
    const int oy = int((m % hw_out) / p.w_out), ox = int(m % p.w_out);
    const int iy0 = oy * p.stride - p.pad, ix0 = ox * p.stride - p.pad;
    const int kx_lo = std::clamp(-ix0, 0, p.kw), kx_hi = std::clamp(p.w - ix0, kx_lo, p.kw);
    float* dst = cols + r * k;
    for (int ky = 0; ky < p.kh; ++ky, dst += tap_row) {
      const int iy = iy0 + ky;
      if (iy < 0 || iy >= p.h || kx_lo == kx_hi) {
        std::memset(dst, 0, sizeof(float) * tap_row);
        continue;
      }
      const float* in = src + ((image * p.h + iy) * p.w + ix0 + kx_lo) * int64_t(p.c_in);
      std::memset(dst, 0, sizeof(float) * kx_lo * p.c_in);
      std::memcpy(dst + kx_lo * p.c_in, in, sizeof(float) * (kx_hi - kx_lo) * p.c_in);
      std::memset(dst + kx_hi * p.c_in, 0, sizeof(float) * (p.kw - kx_hi) * p.c_in);
    }
  }
}

}  // namespace

size_t conv2d_cpu_workspace_bytes(const Conv2dParams& p) { return plan_for(p).workspace_bytes(); }

void conv2d_cpu(const Conv2dParams& p) {
  // As the CUDA kernels (conv2d.cu): the activations their epilogues have, and the sizes they take.
  if (p.act != Activation::None && p.act != Activation::Silu && p.act != Activation::Relu)
    fail("conv2d_cpu: act must be None, Silu or Relu, not ", activation_name(p.act));
  if (!conv2d_out_size_ok(p.h, p.kh, p.stride, p.pad, p.h_out) ||
      !conv2d_out_size_ok(p.w, p.kw, p.stride, p.pad, p.w_out))
    fail("conv2d_cpu: h_out ", p.h_out, ", w_out ", p.w_out,
         " must be (h + pad + pad_end - kh) / stride + 1 with pad_end = pad or pad + 1");
  const Plan plan = plan_for(p);
  if (p.workspace_bytes < plan.workspace_bytes())
    fail("conv2d_cpu: workspace of ", p.workspace_bytes, " bytes, needs ", plan.workspace_bytes());
  const auto* x = static_cast<const float*>(p.x);
  const auto* w = static_cast<const float*>(p.weight);  // (c_out, K) row-major
  auto* y = static_cast<float*>(p.y);
  auto* normalized = static_cast<float*>(p.workspace);          // (n, h, w, c_in) with the prologue
  float* coeffs = normalized + int64_t(p.n) * p.h * p.w * p.c_in;  // (n, 2, c_in) with the prologue
  float* cols = normalized + plan.prologue;

  cpu::GemmEpilogue epilogue;
  epilogue.scale = p.scale;
  epilogue.bias = p.bias;
  epilogue.scale_stride = p.scale_batch_stride;
  epilogue.bias_stride = p.bias_batch_stride;
  epilogue.act = p.act;
  epilogue.residual = static_cast<const float*>(p.residual);
  epilogue.act_after_residual = p.act_after_residual;
  epilogue.rows_per_image = int64_t(p.h_out) * p.w_out;
  epilogue.cols = p.c_out;
  epilogue.check_output(y);
  cpu::use_single_threaded_blas();

  const float* src = x;
  if (p.gn_stats) {
    apply_prologue(p, x, normalized, coeffs);
    src = normalized;
  }
  const int64_t chunk = plan.chunk_rows ? plan.chunk_rows : plan.m;
  cpu::LoopStop stop;
#pragma omp parallel if (plan.m * plan.k * p.c_out >= kParallelMacs)
  for (int64_t row0 = 0; row0 < plan.m; row0 += chunk) {
    // Also the barrier that keeps this chunk's gather from overwriting cols while the previous chunk's
    // GEMM still reads them.
    if (stop(row0 / chunk)) break;
    const int64_t rows = std::min(chunk, plan.m - row0);
    const float* a = src + row0 * plan.k;  // (rows, K)
    if (plan.chunk_rows) {
      // Blocks of rows handed out as threads come free; the loop's barrier lets the GEMM read them all.
#pragma omp for schedule(dynamic, 1)
      for (int64_t r = 0; r < rows; r += kGatherRows)
        im2col(p, src, row0 + r, std::min(kGatherRows, rows - r), cols + r * plan.k);
      a = cols;
    }
    cpu::gemm_team(epilogue, a, plan.k, w, plan.k, y, row0, rows);
  }
}

}  // namespace rtvd
