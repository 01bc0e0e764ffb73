// Sampler ops: pure bandwidth. In the separate ops each thread takes a group of 8 pixels (8 c elements:
// 16-byte loads and stores for the fp16, fp32 and RGBA8 arrays alike) when the pointers are 16-byte
// aligned; the pixels past the last whole group, or all of them when a pointer is not aligned, take one
// thread each. The fused denoise_blend, the one that runs every frame, works in block tiles instead (see
// its kernel).
// Every operation is an explicit round-to-nearest intrinsic: the CPU reference has no fused
// multiply-adds, and matching it bit for bit keeps the RGBA8 bytes identical at rounding boundaries.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <nvtx3/nvtx3.hpp>

#include "kernels/denoise.cuh"

namespace rtvd {
namespace {

constexpr int kThreads = 256;
constexpr int kGroupPixels = 8;  // pixels per vectorised thread: 32 bytes of RGBA8, 16 c bytes of fp16

// v = v_u + guidance (v_c - v_u) for batch 2, v_c for batch 1; x <- x - dt v.
struct StepMath {
  int batch;
  float guidance, dt;
  __device__ float operator()(float x, float v_cond, float v_uncond) const {
    const float v = batch == 2 ? __fadd_rn(v_uncond, __fmul_rn(guidance, __fsub_rn(v_cond, v_uncond))) : v_cond;
    return __fsub_rn(x, __fmul_rn(dt, v));
  }
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

// N values through 16-byte accesses; p must be 16-byte aligned.
template <int N>
__device__ __forceinline__ void load(const float* p, float (&f)[N]) {
  static_assert(N % 4 == 0);
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    const float4 t = reinterpret_cast<const float4*>(p)[i];
    f[4 * i] = t.x, f[4 * i + 1] = t.y, f[4 * i + 2] = t.z, f[4 * i + 3] = t.w;
  }
}

template <int N>
__device__ __forceinline__ void load(const __half* p, float (&f)[N]) {
  static_assert(N % 8 == 0);
#pragma unroll
  for (int i = 0; i < N / 8; ++i) {
    const uint4 raw = reinterpret_cast<const uint4*>(p)[i];
    const auto* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 t = __half22float2(h[j]);
      f[8 * i + 2 * j] = t.x, f[8 * i + 2 * j + 1] = t.y;
    }
  }
}

template <int N>
__device__ __forceinline__ void store(float* p, const float (&f)[N]) {
  static_assert(N % 4 == 0);
#pragma unroll
  for (int i = 0; i < N / 4; ++i)
    reinterpret_cast<float4*>(p)[i] = make_float4(f[4 * i], f[4 * i + 1], f[4 * i + 2], f[4 * i + 3]);
}

template <int N>
__device__ __forceinline__ void store(__half* p, const float (&f)[N]) {
  static_assert(N % 8 == 0);
#pragma unroll
  for (int i = 0; i < N / 8; ++i) {
    uint4 raw;
    auto* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(f[8 * i + 2 * j], f[8 * i + 2 * j + 1]);
    reinterpret_cast<uint4*>(p)[i] = raw;
  }
}

// One RGBA8 pixel with byte stores: the scalar path must not assume any alignment.
__device__ __forceinline__ void store_rgba_pixel(uint8_t* p, uint32_t word) {
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(word >> (8 * i));
}

// 8 pixels of C channels -> 32 bytes of RGBA8.
template <int C>
__device__ __forceinline__ void store_rgba(uint8_t* p, const float (&f)[kGroupPixels * C]) {
  uint32_t words[kGroupPixels];
#pragma unroll
  for (int i = 0; i < kGroupPixels; ++i) words[i] = rgba_word<C>(f + i * C);
  reinterpret_cast<uint4*>(p)[0] = make_uint4(words[0], words[1], words[2], words[3]);
  reinterpret_cast<uint4*>(p)[1] = make_uint4(words[4], words[5], words[6], words[7]);
}

__device__ __forceinline__ uint32_t thread_index() { return blockIdx.x * kThreads + threadIdx.x; }

// Thread i < groups: elements [8 i, 8 i + 8); the next `tail` threads: one element each after them.
__global__ void __launch_bounds__(kThreads)
    guidance_step_kernel(const __half* __restrict__ v, float* __restrict__ x, __half* __restrict__ model_in,
                         int64_t count, uint32_t groups, uint32_t tail, StepMath step) {
  const uint32_t i = thread_index();
  if (i < groups) {
    const int64_t e = int64_t(i) * 8;
    float vc[8], vu[8], xs[8];
    load(v + e, vc);
    if (step.batch == 2) load(v + count + e, vu);
    load(x + e, xs);
#pragma unroll
    for (int k = 0; k < 8; ++k) xs[k] = step(xs[k], vc[k], step.batch == 2 ? vu[k] : vc[k]);
    store(x + e, xs);
    if (model_in)
      for (int b = 0; b < step.batch; ++b) store(model_in + b * count + e, xs);
  } else if (i - groups < tail) {
    const int64_t e = int64_t(groups) * 8 + (i - groups);
    const float vc = __half2float(v[e]);
    const float xe = step(x[e], vc, step.batch == 2 ? __half2float(v[count + e]) : vc);
    x[e] = xe;
    if (model_in)
      for (int b = 0; b < step.batch; ++b) model_in[b * count + e] = __float2half_rn(xe);
  }
}

// Thread i < groups: elements [4 i, 4 i + 4) as float4; then one element per thread.
__global__ void __launch_bounds__(kThreads)
    temporal_blend_kernel(const float* __restrict__ x, float* prev, float* out, uint32_t groups, uint32_t tail,
                          BlendMath blend) {
  const uint32_t i = thread_index();
  if (i < groups) {
    float xs[4], ps[4];
    load(x + int64_t(i) * 4, xs);
    if (!blend.first) load(prev + int64_t(i) * 4, ps);
#pragma unroll
    for (int k = 0; k < 4; ++k) ps[k] = blend(ps[k], xs[k]);
    store(out + int64_t(i) * 4, ps);
    store(prev + int64_t(i) * 4, ps);
  } else if (i - groups < tail) {
    const int64_t e = int64_t(groups) * 4 + (i - groups);
    const float o = blend(blend.first ? 0.0f : prev[e], x[e]);
    out[e] = o;
    prev[e] = o;
  }
}

// Thread i < groups: pixels [8 i, 8 i + 8); then one pixel per thread.
template <int C>
__global__ void __launch_bounds__(kThreads)
    to_rgba8_kernel(const float* __restrict__ x, uint8_t* __restrict__ rgba, uint32_t groups, uint32_t tail) {
  const uint32_t i = thread_index();
  if (i < groups) {
    float xs[kGroupPixels * C];
    load(x + int64_t(i) * kGroupPixels * C, xs);
    store_rgba<C>(rgba + int64_t(i) * kGroupPixels * 4, xs);
  } else if (i - groups < tail) {
    const int64_t px = int64_t(groups) * kGroupPixels + (i - groups);
    store_rgba_pixel(rgba + 4 * px, rgba_word<C>(x + px * C));
  }
}

// 4 fp16 values through one 8-byte access; p must be 8-byte aligned.
__device__ __forceinline__ void load4(const __half* p, float (&f)[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}

// The fused last step, by block tiles: each thread takes kTileChunks groups of 4 elements, kThreads
// apart, so that every warp-wide access covers contiguous memory (256 bytes of fp16, 512 of fp32);
// with RGBA8 the blended tile goes through shared memory and each thread converts whole pixels, one word
// per pixel, kThreads apart. Blocks past `tiles` take the pixels after the last whole tile, one per thread
// (all of them when the pointers are not aligned for the vector path: tiles = 0).
// C = channels per pixel; kRgba = write RGBA8 (C is then 1 or 3; without RGBA8 the launcher passes C = 1
// and pixels = elements, since pixel structure no longer matters).
constexpr int kTileChunks = 6;  // 24 elements per thread, all loads in flight at once
constexpr int kTileElems = kThreads * kTileChunks * 4;  // a multiple of 3: whole RGB pixels

template <int C, bool kRgba>
__global__ void __launch_bounds__(kThreads)
    denoise_blend_kernel(const __half* __restrict__ v, float* __restrict__ x, float* __restrict__ prev,
                         uint8_t* __restrict__ rgba, int64_t count, uint32_t tiles, int64_t pixels, StepMath step,
                         BlendMath blend) {
  if (blockIdx.x < tiles) {
    __shared__ float4 tile[kRgba ? kTileElems / 4 : 1];
    const int64_t base = int64_t(blockIdx.x) * kTileElems;
    float vc[kTileChunks][4], vu[kTileChunks][4], xs[kTileChunks][4], ps[kTileChunks][4];
#pragma unroll
    for (int k = 0; k < kTileChunks; ++k) {
      const int64_t e = base + int64_t(k * kThreads + threadIdx.x) * 4;
      load4(v + e, vc[k]);
      if (step.batch == 2) load4(v + count + e, vu[k]);
      load(x + e, xs[k]);
      if (!blend.first) load(prev + e, ps[k]);
    }
#pragma unroll
    for (int k = 0; k < kTileChunks; ++k) {
      const int64_t e = base + int64_t(k * kThreads + threadIdx.x) * 4;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        xs[k][j] = step(xs[k][j], vc[k][j], step.batch == 2 ? vu[k][j] : vc[k][j]);
        ps[k][j] = blend(ps[k][j], xs[k][j]);
      }
      store(x + e, xs[k]);
      store(prev + e, ps[k]);
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
      const float vc = __half2float(v[e]);
      const float xe = step(x[e], vc, step.batch == 2 ? __half2float(v[count + e]) : vc);
      x[e] = xe;
      out[ch] = blend(blend.first ? 0.0f : prev[e], xe);
      prev[e] = out[ch];
    }
    if constexpr (kRgba) store_rgba_pixel(rgba + 4 * px, rgba_word<C>(out));
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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

StepMath step_math(int batch, float guidance, float dt, const char* op) {
  if (batch != 1 && batch != 2) fail(op, ": batch ", batch, ", expected 1 or 2");
  return StepMath{batch, guidance, dt};
}

BlendMath blend_math(float blend, bool first) { return BlendMath{blend, 1.0f - blend, first}; }

}  // namespace

void guidance_step(const GuidanceStepParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"guidance_step"};
  if (p.count < 0) fail("guidance_step: negative count ", p.count);
  const StepMath step = step_math(p.batch, p.guidance, p.dt, "guidance_step");
  // The second image of v and of model_in starts `count` elements in: 16-byte aligned when count % 8 == 0.
  const bool vec = p.count % 8 == 0 && aligned16(p.v) && aligned16(p.x) && aligned16(p.model_in);
  const Split s = split(p.count, 8, vec, "guidance_step");
  if (s.groups + s.tail == 0) return;
  guidance_step_kernel<<<s.blocks(), kThreads, 0, ctx.stream>>>(
      static_cast<const __half*>(p.v), p.x, static_cast<__half*>(p.model_in), p.count, s.groups, s.tail, step);
  RTVD_CHECK_LAUNCH("guidance_step");
}

void temporal_blend(const TemporalBlendParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"temporal_blend"};
  if (p.count < 0) fail("temporal_blend: negative count ", p.count);
  const bool vec = aligned16(p.x) && aligned16(p.prev) && aligned16(p.out);
  const Split s = split(p.count, 4, vec, "temporal_blend");
  if (s.groups + s.tail == 0) return;
  temporal_blend_kernel<<<s.blocks(), kThreads, 0, ctx.stream>>>(p.x, p.prev, p.out, s.groups, s.tail,
                                                                  blend_math(p.blend, p.first));
  RTVD_CHECK_LAUNCH("temporal_blend");
}

void to_rgba8(const ToRgba8Params& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"to_rgba8"};
  if (p.c != 1 && p.c != 3) fail("to_rgba8: ", p.c, " channels, expected 1 or 3");
  if (p.h < 0 || p.w < 0) fail("to_rgba8: negative size ", p.h, "x", p.w);
  const bool vec = aligned16(p.x) && aligned16(p.rgba);
  const Split s = split(int64_t(p.h) * p.w, kGroupPixels, vec, "to_rgba8");
  if (s.groups + s.tail == 0) return;
  if (p.c == 3)
    to_rgba8_kernel<3><<<s.blocks(), kThreads, 0, ctx.stream>>>(p.x, p.rgba, s.groups, s.tail);
  else
    to_rgba8_kernel<1><<<s.blocks(), kThreads, 0, ctx.stream>>>(p.x, p.rgba, s.groups, s.tail);
  RTVD_CHECK_LAUNCH("to_rgba8");
}

void denoise_blend(const DenoiseBlendParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"denoise_blend"};
  if (p.h < 0 || p.w < 0 || p.c < 0) fail("denoise_blend: negative shape");
  if (p.rgba && p.c != 1 && p.c != 3) fail("denoise_blend: RGBA8 output needs 1 or 3 channels, got ", p.c);
  const StepMath step = step_math(p.batch, p.guidance, p.dt, "denoise_blend");
  const BlendMath blend = blend_math(p.blend, p.first);
  const int64_t count = int64_t(p.h) * p.w * p.c;
  // count % 4 == 0 keeps the unconditional half of v 8-byte aligned.
  const bool vec = count % 4 == 0 && aligned16(p.x) && aligned16(p.prev) && reinterpret_cast<uintptr_t>(p.v) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(p.rgba) % 4 == 0;
  const int channels = p.rgba ? p.c : 1;  // without RGBA8, elements are the units
  const int64_t pixels = count / std::max(channels, 1);
  const int64_t tiles = vec ? count / kTileElems : 0;
  const int64_t tail_blocks = (pixels - tiles * (kTileElems / std::max(channels, 1)) + kThreads - 1) / kThreads;
  if (tiles + tail_blocks >= (int64_t(1) << 31)) fail("denoise_blend: ", count, " elements exceed one launch");
  const unsigned blocks = unsigned(tiles + tail_blocks);
  if (blocks == 0) return;
  const auto* v = static_cast<const __half*>(p.v);
  const auto t = uint32_t(tiles);
  if (!p.rgba)
    denoise_blend_kernel<1, false><<<blocks, kThreads, 0, ctx.stream>>>(v, p.x, p.prev, nullptr, count, t, pixels, step, blend);
  else if (p.c == 3)
    denoise_blend_kernel<3, true><<<blocks, kThreads, 0, ctx.stream>>>(v, p.x, p.prev, p.rgba, count, t, pixels, step, blend);
  else
    denoise_blend_kernel<1, true><<<blocks, kThreads, 0, ctx.stream>>>(v, p.x, p.prev, p.rgba, count, t, pixels, step, blend);
  RTVD_CHECK_LAUNCH("denoise_blend");
}

}  // namespace rtvd
