// Sampler ops: pure bandwidth. In guidance_step each thread takes a group of 8 elements (16-byte loads
// and stores of fp16, two of fp32) when the pointers are 16-byte aligned; the elements past the last whole
// group, or all of them when a pointer is not aligned, take one thread each. The fused denoise_blend, the
// one that runs every frame, works in block tiles instead (see its kernel). Its non-finite flag costs a
// compare per element in registers and a 4-byte memset before the launch (a memset node in the frame's
// CUDA graph); only a thread that saw a NaN or Inf stores to it, all of them the same 1.
// Every operation is an explicit round-to-nearest intrinsic: the CPU reference has no fused
// multiply-adds, and matching it bit for bit keeps the RGBA8 bytes identical at rounding boundaries.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <nvtx3/nvtx3.hpp>

#include "kernels/denoise/denoise.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/vector_io.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

constexpr int kThreads = 256;

// v = v_u + guidance (v_c - v_u) for batch 2, v_c for batch 1; x' = x_coef x + out_coef v.
struct StepMath {
  int batch;
  float guidance, x_coef, out_coef;
  __device__ float guided(float v_cond, float v_uncond) const {
    return batch == 2 ? __fadd_rn(v_uncond, __fmul_rn(guidance, __fsub_rn(v_cond, v_uncond))) : v_cond;
  }
  __device__ float operator()(float x, float v_cond, float v_uncond) const {
    return __fadd_rn(__fmul_rn(x_coef, x), __fmul_rn(out_coef, guided(v_cond, v_uncond)));
  }
  // With no x (a decoded image): x' = out_coef v.
  __device__ float no_x(float v_cond, float v_uncond) const { return __fmul_rn(out_coef, guided(v_cond, v_uncond)); }
};

// guidance_step's extra terms: + noise_coef noise, and the model input input_scale x'.
struct StepExtras {
  float noise_coef, input_scale;
  int copies;
};

// out = keep prev + (1 - keep) x, or x on the first frame (prev is then not read: it may hold anything).
struct BlendMath {
  float keep, take;  // take = 1 - keep, rounded on the host as the CPU rounds it
  bool first;
  __device__ float operator()(float prev, float x) const {
    return first ? x : __fadd_rn(__fmul_rn(keep, prev), __fmul_rn(take, x));
  }
};

// [-1, 1] -> [0, 255], clamped, rounded half to even (as lrint on the CPU).
__device__ __forceinline__ uint32_t to_byte(float v) {
  return uint32_t(__float2int_rn(fminf(fmaxf(__fmul_rn(__fadd_rn(v, 1.0f), 127.5f), 0.0f), 255.0f)));
}

// One pixel of C channels (1: grey, 3: RGB) as an RGBA8 word, little-endian: R in the low byte.
template <int C>
__device__ __forceinline__ uint32_t rgba_word(const float* px) {
  const uint32_t r = to_byte(px[0]);
  if constexpr (C == 1) return r | r << 8 | r << 16 | 0xff000000u;
  return r | to_byte(px[1]) << 8 | to_byte(px[2]) << 16 | 0xff000000u;
}

// One RGBA8 pixel with byte stores: the scalar path must not assume any alignment.
__device__ __forceinline__ void store_rgba_pixel(uint8_t* p, uint32_t word) {
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(word >> (8 * i));
}

__device__ __forceinline__ uint32_t thread_index() { return blockIdx.x * kThreads + threadIdx.x; }

// Thread i < groups: elements [8 i, 8 i + 8); the next `tail` threads: one element each after them. v and noise
// may be null (no such term); x' = x_coef x (+ out_coef v) (+ noise_coef noise), in that order.
__global__ void __launch_bounds__(kThreads)
    guidance_step_kernel(const __half* __restrict__ v, const float* x, float* x_out, const float* __restrict__ noise,
                         __half* __restrict__ model_in, int64_t count, uint32_t groups, uint32_t tail, StepMath step,
                         StepExtras extra) {
  start_after_prior_kernels();
  const uint32_t i = thread_index();
  if (i < groups) {
    const int64_t e = int64_t(i) * 8;
    float xs[8], vc[8], vu[8], ns[8];
    load_vec<8>(x + e, xs);
    if (v) {
      load_vec<8>(v + e, vc);
      if (step.batch == 2) load_vec<8>(v + count + e, vu);
    }
    if (noise) load_vec<8>(noise + e, ns);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float y = __fmul_rn(step.x_coef, xs[k]);
      if (v) y = __fadd_rn(y, __fmul_rn(step.out_coef, step.guided(vc[k], step.batch == 2 ? vu[k] : vc[k])));
      if (noise) y = __fadd_rn(y, __fmul_rn(extra.noise_coef, ns[k]));
      xs[k] = y;
    }
    store_vec<8>(x_out + e, xs);
    if (model_in) {
#pragma unroll
      for (int k = 0; k < 8; ++k) vc[k] = __fmul_rn(extra.input_scale, xs[k]);
      for (int b = 0; b < extra.copies; ++b) store_vec<8>(model_in + b * count + e, vc);
    }
  } else if (i - groups < tail) {
    const int64_t e = int64_t(groups) * 8 + (i - groups);
    float y = __fmul_rn(step.x_coef, x[e]);
    if (v) {
      const float vc = __half2float(v[e]);
      y = __fadd_rn(y, __fmul_rn(step.out_coef, step.guided(vc, step.batch == 2 ? __half2float(v[count + e]) : vc)));
    }
    if (noise) y = __fadd_rn(y, __fmul_rn(extra.noise_coef, noise[e]));
    x_out[e] = y;
    if (model_in)
      for (int b = 0; b < extra.copies; ++b) model_in[b * count + e] = __float2half_rn(__fmul_rn(extra.input_scale, y));
  }
}

// The fused last step, by block tiles: each thread takes kTileChunks groups of 4 elements, kThreads
// apart, so that every warp-wide access covers contiguous memory (256 bytes of fp16, 512 of fp32);
// with RGBA8 the blended tile goes through shared memory and each thread converts whole pixels, one word
// per pixel, kThreads apart. Blocks past `tiles` take the pixels after the last whole tile, one per thread
// (all of them when the pointers are not aligned for the vector path: tiles = 0). A value's unconditional
// counterpart is `half` elements after it in v.
// C = channels per pixel; kRgba = write RGBA8 (C is then 1 or 3; without RGBA8 the launcher passes C = 1
// and pixels = elements, since pixel structure no longer matters).
constexpr int kTileChunks = 6;  // 24 elements per thread, all loads in flight at once
constexpr int kTileElems = kThreads * kTileChunks * 4;  // a multiple of 3: whole RGB pixels

template <int C, bool kRgba>
__global__ void __launch_bounds__(kThreads)
    denoise_blend_kernel(const __half* __restrict__ v, float* __restrict__ x, float* __restrict__ prev,
                         uint8_t* __restrict__ rgba, int32_t* __restrict__ nonfinite, int64_t half, uint32_t tiles,
                         int64_t pixels, StepMath step, BlendMath blend) {
  start_after_prior_kernels();
  bool seen = false;  // a value of prev that is NaN or Inf
  if (blockIdx.x < tiles) {
    __shared__ float4 tile[kRgba ? kTileElems / 4 : 1];
    const int64_t base = int64_t(blockIdx.x) * kTileElems;
    float vc[kTileChunks][4], vu[kTileChunks][4], xs[kTileChunks][4], ps[kTileChunks][4];
#pragma unroll
    for (int k = 0; k < kTileChunks; ++k) {
      const int64_t e = base + int64_t(k * kThreads + threadIdx.x) * 4;
      load_vec<4>(v + e, vc[k]);
      if (step.batch == 2) load_vec<4>(v + half + e, vu[k]);
      if (x) load_vec<4>(x + e, xs[k]);
      if (!blend.first) load_vec<4>(prev + e, ps[k]);
    }
#pragma unroll
    for (int k = 0; k < kTileChunks; ++k) {
      const int64_t e = base + int64_t(k * kThreads + threadIdx.x) * 4;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float uncond = step.batch == 2 ? vu[k][j] : vc[k][j];
        xs[k][j] = x ? step(xs[k][j], vc[k][j], uncond) : step.no_x(vc[k][j], uncond);
        ps[k][j] = blend(ps[k][j], xs[k][j]);
        seen |= !isfinite(ps[k][j]);
      }
      if (x) store_vec<4>(x + e, xs[k]);
      store_vec<4>(prev + e, ps[k]);
      if constexpr (kRgba) tile[k * kThreads + threadIdx.x] = make_float4(ps[k][0], ps[k][1], ps[k][2], ps[k][3]);
    }
    if constexpr (kRgba) {
      __syncthreads();
      const float* out = reinterpret_cast<const float*>(tile);
      auto* words = reinterpret_cast<uint32_t*>(rgba) + base / C;
      for (int px = threadIdx.x; px < kTileElems / C; px += kThreads) words[px] = rgba_word<C>(out + px * C);
    }
  } else {
    const int64_t px = int64_t(tiles) * (kTileElems / C) + int64_t(blockIdx.x - tiles) * kThreads + threadIdx.x;
    if (px >= pixels) return;
    float out[C];
#pragma unroll
    for (int ch = 0; ch < C; ++ch) {
      const int64_t e = px * C + ch;
      const float vc = __half2float(v[e]), vu = step.batch == 2 ? __half2float(v[half + e]) : vc;
      const float xe = x ? step(x[e], vc, vu) : step.no_x(vc, vu);
      if (x) x[e] = xe;
      out[ch] = blend(blend.first ? 0.0f : prev[e], xe);
      prev[e] = out[ch];
      seen |= !isfinite(out[ch]);
    }
    if constexpr (kRgba) store_rgba_pixel(rgba + 4 * px, rgba_word<C>(out));
  }
  if (seen && nonfinite) *nonfinite = 1;
}

// Splits `units` into whole vector groups (when `vec`) and single-unit tail threads.
struct Split {
  uint32_t groups = 0, tail = 0;
  unsigned blocks() const { return unsigned((uint64_t(groups) + tail + kThreads - 1) / kThreads); }
};

Split split(int64_t units, int per_group, bool vec, const char* op) {
  Split s;
  const int64_t groups = vec ? units / per_group : 0, tail = units - groups * per_group;
  if (groups + tail >= (int64_t(1) << 31)) fail(op, ": ", units, " elements exceed the 2^31 threads of one launch");
  s.groups = uint32_t(groups);
  s.tail = uint32_t(tail);
  return s;
}

StepMath step_math(int batch, float guidance, float x_coef, float out_coef, const char* op) {
  if (batch != 1 && batch != 2) fail(op, ": batch ", batch, ", expected 1 or 2");
  return StepMath{batch, guidance, x_coef, out_coef};
}

BlendMath blend_math(float blend, bool first) { return BlendMath{blend, 1.0f - blend, first}; }

}  // namespace

void guidance_step(const GuidanceStepParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"guidance_step"};
  if (p.count < 0) fail("guidance_step: negative count ", p.count);
  const StepMath step = step_math(p.batch, p.guidance, p.x_coef, p.out_coef, "guidance_step");
  if (p.model_in && p.copies != 1 && p.copies != 2) fail("guidance_step: copies ", p.copies, ", expected 1 or 2");
  // The second image of v and of model_in starts `count` elements in: 16-byte aligned when count % 8 == 0.
  float* x_out = p.x_out ? p.x_out : p.x;
  const bool vec = p.count % 8 == 0 && aligned16(p.v) && aligned16(p.x) && aligned16(x_out) && aligned16(p.noise) &&
                   aligned16(p.model_in);
  const Split s = split(p.count, 8, vec, "guidance_step");
  if (s.groups + s.tail == 0) return;
  launch_kernel("guidance_step", guidance_step_kernel, s.blocks(), kThreads, 0, ctx.stream,
                static_cast<const __half*>(p.v), p.x, x_out, p.noise, static_cast<__half*>(p.model_in), p.count,
                s.groups, s.tail, step, StepExtras{p.noise_coef, p.input_scale, p.copies});
}

void denoise_blend(const DenoiseBlendParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"denoise_blend"};
  if (p.h < 0 || p.w < 0 || p.c < 0) fail("denoise_blend: negative shape");
  if (p.rgba && p.c != 1 && p.c != 3 && p.c != 4)
    fail("denoise_blend: RGBA8 output needs 1, 3 or 4 channels, got ", p.c);
  const StepMath step = step_math(p.batch, p.guidance, p.x_coef, p.out_coef, "denoise_blend");
  const BlendMath blend = blend_math(p.blend, p.first);
  const int64_t count = int64_t(p.h) * p.w * p.c;
  const int64_t half = p.v_half ? p.v_half : count;
  // count % 4 == 0 and half % 4 == 0 keep the unconditional half of v 8-byte aligned.
  const bool vec = count % 4 == 0 && half % 4 == 0 && aligned16(p.x) && aligned16(p.prev) && reinterpret_cast<uintptr_t>(p.v) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(p.rgba) % 4 == 0;
  const int channels = p.rgba ? p.c : 1;  // without RGBA8, elements are the units
  const int64_t pixels = count / std::max(channels, 1);
  const int64_t tiles = vec ? count / kTileElems : 0;
  const int64_t tail_blocks = (pixels - tiles * (kTileElems / std::max(channels, 1)) + kThreads - 1) / kThreads;
  if (tiles + tail_blocks >= (int64_t(1) << 31)) fail("denoise_blend: ", count, " elements exceed one launch");
  const unsigned blocks = unsigned(tiles + tail_blocks);
  // Cleared on the stream first: the kernel only ever sets it.
  if (p.nonfinite) RTVD_CUDA_CHECK(cudaMemsetAsync(p.nonfinite, 0, sizeof(int32_t), ctx.stream));
  if (blocks == 0) return;
  const auto launch = [&](auto kernel) {
    launch_kernel("denoise_blend", kernel, blocks, kThreads, 0, ctx.stream, static_cast<const __half*>(p.v), p.x,
                  p.prev, p.rgba, p.nonfinite, half, uint32_t(tiles), pixels, step, blend);
  };
  if (!p.rgba) launch(denoise_blend_kernel<1, false>);
  else if (p.c == 3) launch(denoise_blend_kernel<3, true>);
  else if (p.c == 4) launch(denoise_blend_kernel<4, true>);  // a latent shown as it is: its first three channels as RGB
  else launch(denoise_blend_kernel<1, true>);
}

}  // namespace rtvd
