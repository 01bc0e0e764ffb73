// Elementwise U-Net and autoencoder ops: one thread per VEC consecutive channels (or elements). VEC = 8 is
// one 16-byte load or store per access (needs 16-byte aligned pointers and channel counts divisible by 8);
// VEC = 1 is the scalar fallback for any shape. All are pure bandwidth: the launch configuration only has to
// cover the tensor, and index arithmetic stays in 32 bits (the launchers check the sizes).
#include <cuda_fp16.h>

#include <cstdint>
#include <nvtx3/nvtx3.hpp>

#include "kernels/elementwise/elementwise.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/device_math.cuh"
#include "kernels/common/vector_io.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kMaxItems = 1u << 31;  // threads per launch, so that 32-bit indices cannot wrap

__device__ __forceinline__ uint32_t thread_index() { return blockIdx.x * kThreads + threadIdx.x; }

// y (rows, f) = hidden * gelu(gate), x (rows, 2 f) = [hidden | gate]; item = (row, vector of the row).
template <int VEC>
__global__ void __launch_bounds__(kThreads)
    geglu_kernel(const __half* __restrict__ x, __half* __restrict__ y, uint32_t items, uint32_t vectors_per_row) {
  start_after_prior_kernels();
  const uint32_t i = thread_index();
  if (i >= items) return;
  const uint32_t row = i / vectors_per_row, col = (i - row * vectors_per_row) * VEC;
  const size_t f = size_t(vectors_per_row) * VEC;
  const __half* hidden = x + row * 2 * f + col;
  float h[VEC], g[VEC];
  load_vec<VEC>(hidden, h);
  load_vec<VEC>(hidden + f, g);
#pragma unroll
  for (int k = 0; k < VEC; ++k) h[k] *= gelu(g[k]);  // exact (erf) GELU, kernels/common/activation.h
  store_vec<VEC>(y + row * f + col, h);
}

// Flat SiLU: the first `vectors` threads take 8 elements each, the next `tail` threads one each.
__global__ void __launch_bounds__(kThreads)
    silu_kernel(const __half* __restrict__ x, __half* __restrict__ y, uint32_t vectors, uint32_t tail) {
  start_after_prior_kernels();
  const uint32_t i = thread_index();
  if (i < vectors) {
    float v[8];
    load_vec<8>(x + size_t(i) * 8, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = fast_silu(v[k]);
    store_vec<8>(y + size_t(i) * 8, v);
  } else if (i - vectors < tail) {
    const size_t e = size_t(vectors) * 8 + (i - vectors);
    y[e] = __float2half_rn(fast_silu(__half2float(x[e])));
  }
}

// One thread per input vector, written to the four output pixels it covers. Input row r (image-major,
// n * h rows) becomes output rows 2r and 2r + 1, so image boundaries need no special case.
template <int VEC>
__global__ void __launch_bounds__(kThreads) upsample2x_kernel(const __half* __restrict__ x, __half* __restrict__ y,
                                                              uint32_t items, uint32_t vectors_per_pixel, uint32_t w) {
  start_after_prior_kernels();
  const uint32_t i = thread_index();
  if (i >= items) return;
  const uint32_t pixel = i / vectors_per_pixel, vec = i - pixel * vectors_per_pixel;
  const uint32_t row = pixel / w, ix = pixel - row * w;
  const size_t c = size_t(vectors_per_pixel) * VEC;
  const HalfBits<VEC> v = reinterpret_cast<const HalfBits<VEC>*>(x)[i];
  const size_t out_row = 2 * size_t(w) * c;  // elements per output row
  HalfBits<VEC>* out = reinterpret_cast<HalfBits<VEC>*>(y + 2 * size_t(row) * out_row + 2 * size_t(ix) * c) + vec;
  const size_t pixel_step = c / VEC, row_step = out_row / VEC;  // in chunks
  out[0] = v;
  out[pixel_step] = v;
  out[row_step] = v;
  out[row_step + pixel_step] = v;
}

// One thread per output vector: y (pixels, ca + cb) = [a | b].
template <int VEC>
__global__ void __launch_bounds__(kThreads) concat_kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                                                          __half* __restrict__ y, uint32_t items, uint32_t va,
                                                          uint32_t vb) {
  start_after_prior_kernels();
  const uint32_t i = thread_index();
  if (i >= items) return;
  const uint32_t vy = va + vb, pixel = i / vy, vec = i - pixel * vy;
  const auto* src = vec < va ? reinterpret_cast<const HalfBits<VEC>*>(a) + size_t(pixel) * va + vec
                             : reinterpret_cast<const HalfBits<VEC>*>(b) + size_t(pixel) * vb + (vec - va);
  reinterpret_cast<HalfBits<VEC>*>(y)[i] = *src;
}

// Flat y = out_scale * act(in_scale * x + in_shift) (+ residual), laid out as silu_kernel: `vectors` threads
// of 8, then `tail` of one. The activation is activation.h's, in fp32: its exact exp and tanh cost nothing here.
__global__ void __launch_bounds__(kThreads) scale_activation_kernel(const __grid_constant__ ScaleActivationParams p,
                                                                    uint32_t vectors, uint32_t tail) {
  start_after_prior_kernels();
  const auto* x = static_cast<const __half*>(p.x);
  const auto* r = static_cast<const __half*>(p.residual);
  auto* y = static_cast<__half*>(p.y);
  const uint32_t i = thread_index();
  if (i < vectors) {
    float v[8], add[8] = {};
    load_vec<8>(x + size_t(i) * 8, v);
    if (r) load_vec<8>(r + size_t(i) * 8, add);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = p.out_scale * apply_activation(p.in_scale * v[k] + p.in_shift, p.act) + add[k];
    store_vec<8>(y + size_t(i) * 8, v);
  } else if (i - vectors < tail) {
    const size_t e = size_t(vectors) * 8 + (i - vectors);
    const float v = p.out_scale * apply_activation(p.in_scale * __half2float(x[e]) + p.in_shift, p.act);
    y[e] = __float2half_rn(r ? v + __half2float(r[e]) : v);
  }
}

unsigned blocks_for(uint32_t items) { return (items + kThreads - 1) / kThreads; }

// Items (threads) of one launch; fails when they would not fit the 32-bit indexing.
uint32_t checked_items(int64_t items, const char* op) {
  if (items < 0 || items >= int64_t(kMaxItems)) fail(op, ": ", items, " work items, need 0 <= items < 2^31");
  return uint32_t(items);
}

}  // namespace

void geglu(const GegluParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"geglu"};
  if (p.rows < 0 || p.f < 0) fail("geglu: negative shape rows ", p.rows, " f ", p.f);
  const bool vec = p.f % 8 == 0 && aligned16(p.x) && aligned16(p.y);
  const int width = vec ? 8 : 1;
  const uint32_t items = checked_items(int64_t(p.rows) * (p.f / width), "geglu");
  if (items == 0) return;
  const auto* x = static_cast<const __half*>(p.x);
  auto* y = static_cast<__half*>(p.y);
  if (vec)
    launch_kernel("geglu", geglu_kernel<8>, blocks_for(items), kThreads, 0, ctx.stream, x, y, items, p.f / 8);
  else
    launch_kernel("geglu", geglu_kernel<1>, blocks_for(items), kThreads, 0, ctx.stream, x, y, items, p.f);
}

void silu(const SiluParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"silu"};
  if (p.count < 0) fail("silu: negative count ", p.count);
  const bool vec = aligned16(p.x) && aligned16(p.y);
  const int64_t vectors = vec ? p.count / 8 : 0, tail = p.count - 8 * vectors;
  const uint32_t items = checked_items(vectors + tail, "silu");
  if (items == 0) return;
  launch_kernel("silu", silu_kernel, blocks_for(items), kThreads, 0, ctx.stream, static_cast<const __half*>(p.x),
                static_cast<__half*>(p.y), uint32_t(vectors), uint32_t(tail));
}

void upsample2x(const Upsample2xParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"upsample2x"};
  if (p.n < 0 || p.h < 0 || p.w < 0 || p.c < 0) fail("upsample2x: negative shape");
  // The output is 4x the input: check its size, the larger index space.
  checked_items(4 * int64_t(p.n) * p.h * p.w * p.c, "upsample2x");
  const bool vec = p.c % 8 == 0 && aligned16(p.x) && aligned16(p.y);
  const int width = vec ? 8 : 1;
  const uint32_t items = uint32_t(int64_t(p.n) * p.h * p.w * (p.c / width));
  if (items == 0) return;
  const auto* x = static_cast<const __half*>(p.x);
  auto* y = static_cast<__half*>(p.y);
  if (vec)
    launch_kernel("upsample2x", upsample2x_kernel<8>, blocks_for(items), kThreads, 0, ctx.stream, x, y, items, p.c / 8,
                  p.w);
  else
    launch_kernel("upsample2x", upsample2x_kernel<1>, blocks_for(items), kThreads, 0, ctx.stream, x, y, items, p.c,
                  p.w);
}

void concat(const ConcatParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"concat"};
  if (p.pixels < 0 || p.ca < 0 || p.cb < 0) fail("concat: negative shape");
  const bool vec = p.ca % 8 == 0 && p.cb % 8 == 0 && aligned16(p.a) && aligned16(p.b) && aligned16(p.y);
  const int width = vec ? 8 : 1;
  const uint32_t items = checked_items(p.pixels * ((p.ca + p.cb) / width), "concat");
  if (items == 0) return;
  const auto* a = static_cast<const __half*>(p.a);
  const auto* b = static_cast<const __half*>(p.b);
  auto* y = static_cast<__half*>(p.y);
  if (vec)
    launch_kernel("concat", concat_kernel<8>, blocks_for(items), kThreads, 0, ctx.stream, a, b, y, items, p.ca / 8,
                  p.cb / 8);
  else
    launch_kernel("concat", concat_kernel<1>, blocks_for(items), kThreads, 0, ctx.stream, a, b, y, items, p.ca, p.cb);
}

void scale_activation(const ScaleActivationParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"scale_activation"};
  if (p.count < 0) fail("scale_activation: negative count ", p.count);
  const bool vec = aligned16(p.x) && aligned16(p.y) && aligned16(p.residual);
  const int64_t vectors = vec ? p.count / 8 : 0, tail = p.count - 8 * vectors;
  const uint32_t items = checked_items(vectors + tail, "scale_activation");
  if (items == 0) return;
  launch_kernel("scale_activation", scale_activation_kernel, blocks_for(items), kThreads, 0, ctx.stream, p,
                uint32_t(vectors), uint32_t(tail));
}

}  // namespace rtvd
