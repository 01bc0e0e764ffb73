// conv2d: implicit GEMM on tensor cores (mma.sync m16n8k16, fp16 operands, fp32 accumulators), sm_80+.
//   A (M, K) = im2col(pre(x)), M = n h_out w_out, K = kh kw c_in in (r, s, c) order, never materialised;
//   B (N, K) = the OHWI weight as it lies (each output channel's K values contiguous), N = c_out;
//   y (M, N) = act(A B^T * scale + bias) + residual.
// With c_in % 8 == 0 each 16-byte chunk of an A row is 8 channels of one input pixel at one filter tap, so
// it is one cp.async, or 16 zero bytes for padding, rows past M and K past the end. Tiles stream through
// a 4-stage cp.async ring in XOR-swizzled shared memory and reach the tensor cores through ldmatrix.
// The epilogue stages the fp32 tile in shared memory so that each thread stores 8 channels of one pixel
// with one 16-byte store (and reads the residual the same way).
// GroupNorm+SiLU prologue: each thread normalises, in shared memory, the chunks it copied there itself,
// once its cp.async group has landed and before the barrier that hands the stage to the tensor cores, so
// the prologue keeps the full ring depth. Chunks that are padding stay zero. Per (image, channel) scale
// and shift come from a table built once per block in shared memory.
// Split-K (few output tiles, long K: SD's 32x32 and 16x16 levels): blocks write fp32 partial tiles to
// ctx.workspace and a second kernel sums them in a fixed order and runs the epilogue.
// Direct fallback (c_in % 8 != 0, e.g. the 3- or 4-channel input conv, or unaligned pointers): one thread
// per output element, fp32.
// Both check every tap against the input's bounds, so the padding after the input may be one row or column
// wider than before it (diffusers' Downsample2D: h_out and w_out say so, conv2d.h).
#include "kernels/conv2d/conv2d.cuh"

#include <algorithm>
#include <cstdint>

#include "kernels/common/alignment.h"
#include "kernels/conv2d/conv2d_traits.cuh"
#include "kernels/common/nvtx_range.h"
#include "kernels/common/sm80_ptx.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

using namespace conv2d_detail;
using namespace sm80;  // cp.async, ldmatrix, mma.sync (kernels/common/sm80_ptx.cuh)

constexpr int kMaxSplitK = 8;
// Input coordinate origin of rows past M: every tap is out of bounds, so their chunks are zero-filled.
constexpr int kOutside = -(1 << 29);

// ---- kernels ----

struct IgemmArgs {
  Conv2dParams p;
  GemmShape g;
  int k_tiles = 0;           // ceil(K / 32)
  int split_k = 1;           // blockIdx.z takes k-tiles [z k_tiles / split_k, (z + 1) k_tiles / split_k)
  float* partials = nullptr; // (split_k, M, partial_pitch) fp32 when split_k > 1
  int partial_pitch = 0;     // N rounded up to 8: whole 8-column chunks, 32-byte aligned
  int gn_images = 0;         // rows of the GroupNorm table (gn_images_per_tile)
  bool vec_store = false;    // 16-byte y and residual accesses
};

// Grid (M tiles, N tiles, split_k). Block tile T::kBM output pixels x T::kBN output channels.
template <class T, bool kGn>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocksPerSm) conv2d_igemm_kernel(const __grid_constant__ IgemmArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];  // kStages x (A tile, B tile); then the GroupNorm table
  const Conv2dParams& p = a.p;
  const auto* x = static_cast<const __half*>(p.x);       // (n, h, w, c_in)
  const auto* wt = static_cast<const __half*>(p.weight); // (N, K)
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.x * T::kBM, n0 = blockIdx.y * T::kBN;
  const int kt_begin = blockIdx.z * a.k_tiles / a.split_k, kt_end = (blockIdx.z + 1) * a.k_tiles / a.split_k;

  // Loads: this thread's chunk column and first row; its rows are row0 + i kRowStep, same swizzle.
  const int chunk = tid % T::kChunksPerRow, row0 = tid / T::kChunksPerRow;
  const int load_offset = tile_offset(row0, chunk);
  int a_img[T::kALoads], a_ih0[T::kALoads], a_iw0[T::kALoads];
  int64_t a_base[T::kALoads];  // element offset of (img, ih0, iw0, 0); only used for taps in bounds
#pragma unroll
  for (int i = 0; i < T::kALoads; ++i) {
    const int m = m0 + row0 + i * T::kRowStep;
    const RowOrigin o = m < a.g.m ? row_origin(p, a.g.hw_out, m) : RowOrigin{0, kOutside, kOutside};
    a_img[i] = o.img, a_ih0[i] = o.ih0, a_iw0[i] = o.iw0;
    a_base[i] = ((int64_t(o.img) * p.h + o.ih0) * p.w + o.iw0) * p.c_in;
  }
  const auto tap_in_bounds = [&](const TapCursor& t, int i) {
    return t.r < p.kh && unsigned(a_ih0[i] + t.r) < unsigned(p.h) && unsigned(a_iw0[i] + t.s) < unsigned(p.w);
  };

  // The index math above reads only the params: it overlaps the kernels ahead. Memory from here on.
  start_after_prior_kernels();
  const int img_first = m0 / a.g.hw_out;
  const auto* gn_table = reinterpret_cast<const float4*>(smem + T::kPipeBytes);  // (gn_images, c_in) x (a, b)
  if constexpr (kGn) {
    auto* table = reinterpret_cast<float2*>(smem + T::kPipeBytes);
    for (int i = tid; i < a.gn_images * p.c_in; i += T::kThreads) {
      const int img = img_first + i / p.c_in;
      if (img < p.n) table[i] = gn_fold(p, img, i % p.c_in);
    }
    __syncthreads();
  }

  const uint32_t smem0 = smem_address(smem);
  TapCursor load_tap;
  load_tap.seek(kt_begin * T::kBK + chunk * 8, p.c_in, p.kw);
  int load_kt = kt_begin;
  const auto load_tile = [&](int stage) {
    const uint32_t a_dst = smem0 + stage * T::kStageBytes + load_offset;
    const uint32_t b_dst = a_dst + T::kATileBytes;
    // A: 8 channels of one input pixel per row, for this k-tile's tap.
    const int64_t tap_offset = (int64_t(load_tap.r) * p.w + load_tap.s) * p.c_in + load_tap.c;
#pragma unroll
    for (int i = 0; i < T::kALoads; ++i) {
      const bool ok = tap_in_bounds(load_tap, i);
      cp_async_16<true>(a_dst + i * T::kRowStep * T::kRowBytes, ok ? x + a_base[i] + tap_offset : x, ok);
    }
    // B: 8 consecutive K values of one output channel per row.
    const int k = load_kt * T::kBK + chunk * 8;
#pragma unroll
    for (int i = 0; i < T::kBLoads; ++i) {
      const int row = row0 + i * T::kRowStep, n = n0 + row;
      if (T::kBLoads * T::kRowStep == T::kBN || row < T::kBN) {
        const bool ok = n < a.g.n && k < a.g.k;
        cp_async_16<false>(b_dst + i * T::kRowStep * T::kRowBytes, ok ? wt + int64_t(n) * a.g.k + k : wt, ok);
      }
    }
    load_tap.advance(T::kBK, p.c_in, p.kw);
    ++load_kt;
  };

  // pre(x) in place on this thread's own A chunks of a stage that has landed; padding chunks stay zero.
  TapCursor gn_tap = load_tap;
  const auto normalize_stage = [&](int stage) {
    uint8_t* a_tile = smem + stage * T::kStageBytes + load_offset;
#pragma unroll
    for (int i = 0; i < T::kALoads; ++i) {
      if (!tap_in_bounds(gn_tap, i)) continue;
      auto* v = reinterpret_cast<uint4*>(a_tile + i * T::kRowStep * T::kRowBytes);
      const float4* f = gn_table + ((a_img[i] - img_first) * p.c_in + gn_tap.c) / 2;  // 8 (a, b) pairs
      uint4 raw = *v;
      auto* h2 = reinterpret_cast<__half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 ab = f[j];  // channels 2j, 2j + 1
        const float2 xv = __half22float2(h2[j]);
        h2[j] = __floats2half2_rn(fast_silu(xv.x * ab.x + ab.y), fast_silu(xv.y * ab.z + ab.w));
      }
      *v = raw;
    }
    gn_tap.advance(T::kBK, p.c_in, p.kw);
  };

  // Compute: warp (warp_m, warp_n) owns rows wm0.. and columns wn0.. of the block tile.
  const int wm0 = (warp / T::kWarpsN) * T::kWarpM, wn0 = (warp % T::kWarpsN) * T::kWarpN;
  uint32_t a_frag_offset[T::kKSteps], b_frag_offset[T::kKSteps];
#pragma unroll
  for (int kk = 0; kk < T::kKSteps; ++kk) {
    a_frag_offset[kk] = tile_offset(wm0 + a_frag_row(lane), a_frag_chunk(lane, kk));
    b_frag_offset[kk] = T::kATileBytes + tile_offset(wn0 + b_frag_row(lane), b_frag_chunk(lane, kk));
  }
  float acc[T::kMFrags][T::kNFrags][4] = {};
  const auto compute_stage = [&](int stage) {
    const uint32_t base = smem0 + stage * T::kStageBytes;
#pragma unroll
    for (int kk = 0; kk < T::kKSteps; ++kk) {
      uint32_t af[T::kMFrags][4], bf[T::kNFrags][2];
#pragma unroll
      for (int i = 0; i < T::kMFrags; ++i) ldmatrix_x4(af[i], base + a_frag_offset[kk] + i * 16 * T::kRowBytes);
#pragma unroll
      for (int j = 0; j + 1 < T::kNFrags; j += 2) {
        uint32_t r[4];
        ldmatrix_x4(r, base + b_frag_offset[kk] + j * 8 * T::kRowBytes);
        bf[j][0] = r[0], bf[j][1] = r[1], bf[j + 1][0] = r[2], bf[j + 1][1] = r[3];
      }
      if constexpr (T::kNFrags % 2 == 1)
        ldmatrix_x2(bf[T::kNFrags - 1], base + b_frag_offset[kk] + (T::kNFrags - 1) * 8 * T::kRowBytes);
#pragma unroll
      for (int i = 0; i < T::kMFrags; ++i)
#pragma unroll
        for (int j = 0; j < T::kNFrags; ++j) mma_16816(acc[i][j], af[i], bf[j]);
    }
  };

  // The ring: tile kt_begin + i lives in stage i % kStages; one group committed per tile (empty past the end).
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (load_kt < kt_end) load_tile(s);
    cp_async_commit();
  }
  int stage = 0;
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    cp_async_wait<T::kStages - 2>();  // this thread's copies of tile kt have landed
    if constexpr (kGn) normalize_stage(stage);
    __syncthreads();  // everyone's have; and everyone is done reading the stage refilled next
    if (load_kt < kt_end) load_tile(stage == 0 ? T::kStages - 1 : stage - 1);
    cp_async_commit();
    compute_stage(stage);
    stage = stage + 1 == T::kStages ? 0 : stage + 1;
  }

  // Epilogue: fp32 tile to shared memory (reusing the ring), then 8 channels of one pixel per thread.
  cp_async_wait<0>();
  __syncthreads();
  auto* cs = reinterpret_cast<float*>(smem);  // (kBM, kCPitch)
#pragma unroll
  for (int i = 0; i < T::kMFrags; ++i)
#pragma unroll
    for (int j = 0; j < T::kNFrags; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int r = wm0 + i * 16 + acc_row(lane, e), c = wn0 + j * 8 + acc_col(lane, e);
        *reinterpret_cast<float2*>(cs + r * T::kCPitch + c) = make_float2(acc[i][j][e], acc[i][j][e + 1]);
      }
  __syncthreads();
  constexpr int kChunksN = T::kBN / 8;
  for (int idx = tid; idx < T::kBM * kChunksN; idx += T::kThreads) {
    const int r = idx / kChunksN, c8 = idx % kChunksN;
    const int m = m0 + r, c = n0 + c8 * 8;
    if (m >= a.g.m || c >= a.g.n) continue;
    const float4* src = reinterpret_cast<const float4*>(cs + r * T::kCPitch + c8 * 8);
    const float4 lo = src[0], hi = src[1];
    if (a.split_k > 1) {
      auto* dst = reinterpret_cast<float4*>(a.partials + (int64_t(blockIdx.z) * a.g.m + m) * a.partial_pitch + c);
      dst[0] = lo, dst[1] = hi;
    } else {
      const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      store_outputs8(p, a.g.hw_out, m, c, std::min(8, a.g.n - c), v, a.vec_store);
    }
  }
}

// Split-K: y = epilogue(sum of the split_k partial tiles), summed in split order (deterministic). The parts are
// loaded kLoadsInFlight at a time before they are added: a layer this small waits on each round trip to L2, and
// a loop of one load per part would make it wait split_k times.
__global__ void conv2d_splitk_reduce_kernel(const __grid_constant__ IgemmArgs a) {
  constexpr int kLoadsInFlight = 8;
  start_after_prior_kernels();
  const int chunks_n = (a.g.n + 7) / 8;
  const int64_t chunks = int64_t(a.g.m) * chunks_n, split_stride = int64_t(a.g.m) * a.partial_pitch;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < chunks; idx += int64_t(gridDim.x) * blockDim.x) {
    const int m = int(idx / chunks_n), c = int(idx % chunks_n) * 8;
    const float* src = a.partials + int64_t(m) * a.partial_pitch + c;
    float v[8] = {};
    for (int s0 = 0; s0 < a.split_k; s0 += kLoadsInFlight) {
      float4 lo[kLoadsInFlight], hi[kLoadsInFlight];
#pragma unroll
      for (int s = 0; s < kLoadsInFlight; ++s)
        if (s0 + s < a.split_k) {
          const auto* part = reinterpret_cast<const float4*>(src + (s0 + s) * split_stride);
          lo[s] = part[0], hi[s] = part[1];
        }
#pragma unroll
      for (int s = 0; s < kLoadsInFlight; ++s)
        if (s0 + s < a.split_k) {
          v[0] += lo[s].x, v[1] += lo[s].y, v[2] += lo[s].z, v[3] += lo[s].w;
          v[4] += hi[s].x, v[5] += hi[s].y, v[6] += hi[s].z, v[7] += hi[s].w;
        }
    }
    store_outputs8(a.p, a.g.hw_out, m, c, std::min(8, a.g.n - c), v, a.vec_store);
  }
}

// Direct convolution, one thread per output (m, channel), channel fastest: the threads of a warp share
// the pixel, so x reads are broadcasts and weight rows are reused from L1.
__global__ void conv2d_direct_kernel(const __grid_constant__ Conv2dParams p, GemmShape g) {
  start_after_prior_kernels();
  const auto* x = static_cast<const __half*>(p.x);
  const auto* wt = static_cast<const __half*>(p.weight);
  auto* y = static_cast<__half*>(p.y);
  const int64_t outputs = int64_t(g.m) * g.n;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < outputs; idx += int64_t(gridDim.x) * blockDim.x) {
    const int m = int(idx / g.n), co = int(idx % g.n);
    const RowOrigin o = row_origin(p, g.hw_out, m);
    float acc = 0.0f;
    for (int r = 0; r < p.kh; ++r) {
      const int ih = o.ih0 + r;
      if (ih < 0 || ih >= p.h) continue;
      for (int s = 0; s < p.kw; ++s) {
        const int iw = o.iw0 + s;
        if (iw < 0 || iw >= p.w) continue;
        const __half* xp = x + ((int64_t(o.img) * p.h + ih) * p.w + iw) * p.c_in;
        const __half* wp = wt + (int64_t(co) * g.k + (r * p.kw + s) * p.c_in);
        for (int c = 0; c < p.c_in; ++c) {
          float v = __half2float(xp[c]);
          if (p.gn_stats) {
            const float2 f = gn_fold(p, o.img, c);
            v = fast_silu(v * f.x + f.y);
          }
          acc += v * __half2float(wp[c]);
        }
      }
    }
    const float r = p.residual ? __half2float(static_cast<const __half*>(p.residual)[idx]) : 0.0f;
    y[idx] = __float2half_rn(output_value(p, o.img, co, acc, r));
  }
}

// ---- launchers ----

int ceil_div(int a, int b) { return (a + b - 1) / b; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int current_device_attribute(cudaDeviceAttr attr) {
  int device = 0, value = 0;
  RTVD_CUDA_CHECK(cudaGetDevice(&device));
  RTVD_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

template <class T>
bool fits_shared_memory(const Conv2dParams& p, int smem_limit) {
  return igemm_smem_bytes<T>(p) <= size_t(smem_limit);
}

bool kernel_fits(Conv2dKernel k, const Conv2dParams& p, int smem_limit) {
  switch (k) {
    case Conv2dKernel::Igemm64x64: return fits_shared_memory<Igemm64x64>(p, smem_limit);
    case Conv2dKernel::Igemm128x128: return fits_shared_memory<Igemm128x128>(p, smem_limit);
    case Conv2dKernel::Igemm128x160: return fits_shared_memory<Igemm128x160>(p, smem_limit);
    case Conv2dKernel::Direct: return true;
  }
  return false;
}

int tile_count(Conv2dKernel k, const GemmShape& g) {
  switch (k) {
    case Conv2dKernel::Igemm64x64: return ceil_div(g.m, 64) * ceil_div(g.n, 64);
    case Conv2dKernel::Igemm128x128: return ceil_div(g.m, 128) * ceil_div(g.n, 128);
    case Conv2dKernel::Igemm128x160: return ceil_div(g.m, 128) * ceil_div(g.n, 160);
    case Conv2dKernel::Direct: return 1;
  }
  return 1;
}

template <class T>
void launch_igemm(const Conv2dParams& p, const Conv2dConfig& cfg, const CudaContext& ctx) {
  IgemmArgs a;
  a.p = p;
  a.g = gemm_shape(p);
  a.k_tiles = ceil_div(a.g.k, T::kBK);
  a.split_k = cfg.split_k;
  a.partials = static_cast<float*>(ctx.workspace);
  a.partial_pitch = ceil_div(a.g.n, 8) * 8;
  a.gn_images = p.gn_stats ? gn_images_per_tile(T::kBM, a.g.hw_out, p.n) : 0;
  a.vec_store = p.c_out % 8 == 0 && aligned16(p.y) && aligned16(p.residual);

  const dim3 grid(ceil_div(a.g.m, T::kBM), ceil_div(a.g.n, T::kBN), cfg.split_k);
  const size_t smem = igemm_smem_bytes<T>(p);
  const auto kernel = p.gn_stats ? conv2d_igemm_kernel<T, true> : conv2d_igemm_kernel<T, false>;
  RTVD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch_kernel("conv2d", kernel, grid, T::kThreads, smem, ctx.stream, a);
  if (cfg.split_k > 1) splitk_reduce(p, a.partials, cfg.split_k, a.partial_pitch, ctx);
}

}  // namespace

void conv2d_detail::splitk_reduce(const Conv2dParams& p, const float* partials, int split_k, int partial_pitch,
                                  const CudaContext& ctx) {
  IgemmArgs a;
  a.p = p;
  a.g = gemm_shape(p);
  a.split_k = split_k;
  a.partials = const_cast<float*>(partials);
  a.partial_pitch = partial_pitch;
  a.vec_store = p.c_out % 8 == 0 && aligned16(p.y) && aligned16(p.residual);
  const int64_t chunks = int64_t(a.g.m) * ceil_div(a.g.n, 8);
  const int blocks = int(std::min<int64_t>(ceil_div(chunks, int64_t(256)), int64_t(32) * std::max(ctx.sm_count, 1)));
  launch_kernel("conv2d split-K reduction", conv2d_splitk_reduce_kernel, blocks, 256, 0, ctx.stream, a);
}

namespace {

void launch_direct(const Conv2dParams& p, const CudaContext& ctx) {
  const GemmShape g = gemm_shape(p);
  const int64_t outputs = int64_t(g.m) * g.n;
  const int blocks = int(std::min<int64_t>(ceil_div(outputs, int64_t(256)), int64_t(64) * std::max(ctx.sm_count, 1)));
  launch_kernel("conv2d (direct)", conv2d_direct_kernel, blocks, 256, 0, ctx.stream, p, g);
}

void run(const Conv2dParams& p, const Conv2dConfig& cfg, const CudaContext& ctx) {
  const NvtxRange range("conv2d");
  switch (cfg.kernel) {
    case Conv2dKernel::Direct: return launch_direct(p, ctx);
    case Conv2dKernel::Igemm64x64: return launch_igemm<Igemm64x64>(p, cfg, ctx);
    case Conv2dKernel::Igemm128x128: return launch_igemm<Igemm128x128>(p, cfg, ctx);
    case Conv2dKernel::Igemm128x160: return launch_igemm<Igemm128x160>(p, cfg, ctx);
  }
}

}  // namespace

void conv2d_detail::check_params(const Conv2dParams& p, const char* op) {
  const char* unmet = nullptr;
  const int64_t m = int64_t(p.n) * p.h_out * p.w_out, k = int64_t(p.kh) * p.kw * p.c_in;
  if (!p.x || !p.weight || !p.y) unmet = "x, weight and y must be set";
  else if (p.x == p.y) unmet = "y must not alias x";
  else if (p.n <= 0 || p.h <= 0 || p.w <= 0 || p.c_in <= 0 || p.c_out <= 0) unmet = "n, h, w, c_in, c_out must be positive";
  else if (p.kh <= 0 || p.kw <= 0 || p.stride <= 0 || p.pad < 0) unmet = "kh, kw, stride must be positive and pad non-negative";
  else if (!conv2d_out_size_ok(p.h, p.kh, p.stride, p.pad, p.h_out) ||
           !conv2d_out_size_ok(p.w, p.kw, p.stride, p.pad, p.w_out))
    unmet = "h_out, w_out must be (h + pad + pad_end - kh) / stride + 1 with pad_end = pad or pad + 1, positive";
  else if (m >= (int64_t(1) << 31) || k >= (int64_t(1) << 31) || int64_t(p.h) * p.w >= (int64_t(1) << 31))
    unmet = "n h_out w_out, kh kw c_in and h w must fit in 31 bits";
  else if ((p.scale && p.scale_batch_stride < 0) || (p.bias && p.bias_batch_stride < 0))
    unmet = "scale and bias batch strides must be non-negative";
  else if (p.gn_stats && (!p.gn_gamma || !p.gn_beta || p.gn_groups <= 0 || p.c_in % p.gn_groups != 0))
    unmet = "the GroupNorm prologue needs gn_gamma, gn_beta and gn_groups > 0 dividing c_in";
  else if (p.act != Activation::None && p.act != Activation::Silu && p.act != Activation::Relu)
    unmet = "act must be None, Silu or Relu";
  if (unmet) fail(op, ": ", unmet);
}

const char* conv2d_kernel_name(Conv2dKernel k) {
  switch (k) {
    case Conv2dKernel::Direct: return "direct";
    case Conv2dKernel::Igemm64x64: return "igemm 64x64";
    case Conv2dKernel::Igemm128x128: return "igemm 128x128";
    case Conv2dKernel::Igemm128x160: return "igemm 128x160";
  }
  return "unknown";
}

bool conv2d_fast_path_ok(const Conv2dParams& p, std::string* why) {
  const char* unmet = nullptr;
  if (p.c_in % 8 != 0) unmet = "c_in must be a multiple of 8";
  else if (!aligned16(p.x) || !aligned16(p.weight)) unmet = "x and weight must be 16-byte aligned";
  else if (ceil_div(p.c_out, 64) > 65535) unmet = "c_out must be below 64 x 65536 (grid y)";
  else if (!kernel_fits(Conv2dKernel::Igemm64x64, p, current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)))
    unmet = "the GroupNorm table (c_in x images per tile) must fit in shared memory";
  if (unmet && why) *why = unmet;
  return !unmet;
}

size_t conv2d_workspace_bytes(const Conv2dParams& p, const Conv2dConfig& cfg) {
  if (cfg.split_k <= 1) return 0;
  const GemmShape g = gemm_shape(p);
  return sizeof(float) * size_t(cfg.split_k) * size_t(g.m) * size_t(ceil_div(g.n, 8) * 8);
}

// Large tiles when they fill the SMs by themselves (128 x 160 when c_out is a multiple of 160, SD's
// widths, else 128 x 128); large tiles split along K when K is long (>= 64 k-tiles: SD's 32x32 and 16x16
// levels); else 64 x 64 tiles, split along K when even those leave half the SMs idle (the default model).
Conv2dConfig conv2d_choose_config(const Conv2dParams& p, const CudaContext& ctx) {
  check_params(p, "conv2d");
  if (!conv2d_fast_path_ok(p)) return {Conv2dKernel::Direct, 1};
  const GemmShape g = gemm_shape(p);
  const int sms = ctx.sm_count > 0 ? ctx.sm_count : current_device_attribute(cudaDevAttrMultiProcessorCount);
  const int smem_limit = current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  const int k_tiles = ceil_div(g.k, 32);
  const auto with_split = [&](Conv2dKernel kernel, int split) {
    Conv2dConfig cfg{kernel, std::clamp(split, 1, kMaxSplitK)};
    while (cfg.split_k > 1 && conv2d_workspace_bytes(p, cfg) > ctx.workspace_bytes) --cfg.split_k;
    return cfg;
  };

  const Conv2dKernel large = g.n % 160 == 0 ? Conv2dKernel::Igemm128x160 : Conv2dKernel::Igemm128x128;
  if (kernel_fits(large, p, smem_limit)) {
    const int tiles = tile_count(large, g);
    if (4 * tiles >= 3 * sms) return {large, 1};
    if (k_tiles >= 64) {
      const Conv2dConfig cfg = with_split(large, sms / tiles);
      if (cfg.split_k > 1) return cfg;
    }
  }
  const int tiles = tile_count(Conv2dKernel::Igemm64x64, g);
  const bool split = 2 * tiles < sms && k_tiles >= 16;
  return with_split(Conv2dKernel::Igemm64x64, split ? std::min(sms / tiles, k_tiles / 8) : 1);
}

bool conv2d_config_can_implement(const Conv2dParams& p, const Conv2dConfig& cfg, std::string* why) {
  const char* kernel = conv2d_kernel_name(cfg.kernel);
  std::string unmet;
  if (cfg.kernel == Conv2dKernel::Direct) {
    if (cfg.split_k != 1) unmet = cat("the direct kernel takes split_k 1, not ", cfg.split_k);
  } else if (std::string fast; !conv2d_fast_path_ok(p, &fast)) {
    unmet = cat(kernel, " can't run: ", fast);
  } else if (!kernel_fits(cfg.kernel, p, current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin))) {
    unmet = cat(kernel, " needs more shared memory than the device has (GroupNorm table, c_in ", p.c_in, ")");
  } else if (cfg.split_k < 1 || cfg.split_k > kMaxSplitK) {
    unmet = cat("split_k must be in [1, ", kMaxSplitK, "], not ", cfg.split_k);
  }
  if (!unmet.empty() && why) *why = unmet;
  return unmet.empty();
}

void conv2d_with_config(const Conv2dParams& p, const Conv2dConfig& cfg, const CudaContext& ctx) {
  check_params(p, "conv2d");
  std::string why;
  if (!conv2d_config_can_implement(p, cfg, &why)) fail("conv2d: ", why);
  if (conv2d_workspace_bytes(p, cfg) > ctx.workspace_bytes)
    fail("conv2d: ", conv2d_kernel_name(cfg.kernel), " split_k ", cfg.split_k, " needs ", conv2d_workspace_bytes(p, cfg),
         " bytes of ctx.workspace, has ", ctx.workspace_bytes);
  run(p, cfg, ctx);
}

}  // namespace rtvd
