#include "kernel_bench.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention.cuh"
#include "kernels/attention_sm90.cuh"
#include "kernels/conv2d.cuh"
#include "kernels/conv2d_sm90.cuh"
#include "kernels/cuda_context.cuh"
#include "kernels/denoise.cuh"
#include "kernels/group_norm.cuh"
#include "kernels/linear.cuh"
#if RTVD_HAS_CUDNN
#include "kernels/attention_cudnn.cuh"
#include "kernels/conv2d_cudnn.cuh"
#endif

namespace rtvd {

namespace {

constexpr size_t kRotateBytes = size_t(160) << 20;  // > 3x the H100's 50 MB L2

__global__ void fill_kernel(__half* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    p[i] = __float2half(float(int(z >> 40) % 2001 - 1000) / 1000.0f);  // uniform in [-1, 1]
  }
}

// Device memory for one benchmark, freed at the end of it.
struct Buffers {
  std::vector<void*> ptrs;
  void* half_random(size_t n) {
    void* p = raw(n * 2);
    fill_kernel<<<1024, 256>>>(static_cast<__half*>(p), n, ptrs.size() * 7919);
    RTVD_CHECK_LAUNCH("fill");
    return p;
  }
  void* raw(size_t bytes) {
    void* p = nullptr;
    RTVD_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 256)));
    ptrs.push_back(p);
    return p;
  }
  ~Buffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

// Keeps the GPU busy for ~50 us, so that the host has queued what follows before the GPU gets there.
__global__ void hold_kernel() {
  const long long start = clock64();
  while (clock64() - start < 100000) __nanosleep(1000);
}

// Median ms of f(i) over `runs` after 5 warm-ups; i rotates the input copies. Each run waits behind
// hold_kernel, so a launcher's host time (large for library calls) is not counted, as in a frame's graph.
double median_ms(const CudaContext& ctx, int runs, const std::function<void(int)>& f) {
  cudaEvent_t a, b;
  RTVD_CUDA_CHECK(cudaEventCreate(&a));
  RTVD_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f(i);
  std::vector<float> ms(runs);
  for (int i = 0; i < runs; ++i) {
    hold_kernel<<<1, 1, 0, ctx.stream>>>();
    RTVD_CHECK_LAUNCH("hold");
    RTVD_CUDA_CHECK(cudaEventRecord(a, ctx.stream));
    f(i);
    RTVD_CUDA_CHECK(cudaEventRecord(b, ctx.stream));
    RTVD_CUDA_CHECK(cudaEventSynchronize(b));
    RTVD_CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[runs / 2];
}

int copies_for(size_t bytes) { return int(std::clamp<size_t>(kRotateBytes / std::max<size_t>(bytes, 1), 1, 64)); }

struct ConvCase {
  const char* name;
  int n, h, w, c_in, c_out, k;
  bool group_norm;
};
struct AttentionCase {
  const char* name;
  int batch, heads, head_dim, q_len, kv_len;
};

}  // namespace

nlohmann::json bench_kernels(const GpuInfo& gpu, int runs) {
  RTVD_CUDA_CHECK(cudaSetDevice(gpu.index));
  CudaContext ctx;
  RTVD_CUDA_CHECK(cudaStreamCreate(&ctx.stream));
  RTVD_CUBLAS_CHECK(cublasLtCreate(&ctx.cublaslt));
  ctx.sm_version = gpu.sm;
  cudaDeviceProp prop{};
  RTVD_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu.index));
  ctx.sm_count = prop.multiProcessorCount;
  Buffers scratch;
  ctx.workspace_bytes = size_t(256) << 20;
  ctx.workspace = scratch.raw(ctx.workspace_bytes);
  ctx.grid_sync = static_cast<unsigned*>(scratch.raw(sizeof(unsigned)));
  RTVD_CUDA_CHECK(cudaMemset(ctx.grid_sync, 0, sizeof(unsigned)));
  nlohmann::json out = {{"gpu", gpu.name}, {"sm", gpu.sm}, {"runs", runs}};

  // Ceilings.
  double gemm_tflops = 0, copy_gbps = 0;
  {
    Buffers b;
    const int n = 8192;
    LinearParams p;
    p.x = b.half_random(size_t(n) * n);
    p.w = b.half_random(size_t(n) * n);
    p.y = b.raw(size_t(n) * n * 2);
    p.m = p.n = p.k = n;
    gemm_tflops = 2.0 * n * n * double(n) / median_ms(ctx, runs, [&](int) { linear(p, ctx); }) / 1e9;
    const size_t bytes = size_t(1) << 30;
    void* src = b.half_random(bytes / 2);
    void* dst = b.raw(bytes);
    copy_gbps = 2.0 * bytes / median_ms(ctx, runs, [&](int) {
      RTVD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    }) / 1e6;
  }
  out["ceilings"] = {{"gemm_tflops", gemm_tflops}, {"gemm", "fp16 8192^3 via cuBLASLt"}, {"copy_gbps", copy_gbps},
                     {"copy", "1 GiB device-to-device, read + write"}};
  std::printf("ceilings: fp16 GEMM %.0f TFLOP/s, copy %.0f GB/s\n\n", gemm_tflops, copy_gbps);
  std::printf("%-28s %-8s %10s %12s %7s\n", "case", "impl", "ms", "TFLOP/s|GB/s", "% peak");
  auto row = [&](const std::string& name, const std::string& impl, double ms, double flops, double bytes) {
    const bool compute = flops > 0;
    const double rate = compute ? flops / ms / 1e9 : bytes / ms / 1e6;
    const double peak = 100.0 * rate / (compute ? gemm_tflops : copy_gbps);
    std::printf("%-28s %-8s %10.4f %12.1f %7.1f\n", name.c_str(), impl.c_str(), ms, rate, peak);
    out["results"].push_back({{"case", name}, {"impl", impl}, {"ms", ms}, {compute ? "tflops" : "gbps", rate},
                              {"percent_of_peak", peak}, {"flops", flops}, {"bytes", bytes}});
  };

  // Fused conv: y = silu(conv(x) * 1 + bias) + residual, the ResNet epilogue; SD shapes and the default model's.
  const ConvCase convs[] = {
      {"conv3x3 64x64 320->320", 2, 64, 64, 320, 320, 3, false},
      {"conv3x3 32x32 640->640", 2, 32, 32, 640, 640, 3, false},
      {"conv3x3 16x16 1280->1280", 2, 16, 16, 1280, 1280, 3, false},
      {"conv3x3+GN 64x64 320->320", 2, 64, 64, 320, 320, 3, true},
      {"conv3x3 default 64x64 32->32", 2, 64, 64, 32, 32, 3, false},
      {"conv3x3 default 32x32 64->64", 2, 32, 32, 64, 64, 3, false},
      {"conv3x3 default 16x16 96->96", 2, 16, 16, 96, 96, 3, false},
  };
#if RTVD_HAS_CUDNN
  cudnnHandle_t cudnn = nullptr;
  if (cudnnCreate(&cudnn) != CUDNN_STATUS_SUCCESS) fail("cudnnCreate failed");
#endif
  for (const ConvCase& c : convs) {
    Buffers b;
    Conv2dParams p;
    p.n = c.n, p.h = c.h, p.w = c.w, p.c_in = c.c_in, p.c_out = c.c_out, p.kh = p.kw = c.k, p.pad = c.k / 2;
    p.h_out = c.h, p.w_out = c.w, p.act = Activation::Silu;
    const size_t x_elems = size_t(c.n) * c.h * c.w * c.c_in, y_elems = size_t(c.n) * c.h * c.w * c.c_out;
    const int copies = copies_for(x_elems * 2);
    std::vector<void*> xs;
    for (int i = 0; i < copies; ++i) xs.push_back(b.half_random(x_elems));
    p.weight = b.half_random(size_t(c.c_out) * c.k * c.k * c.c_in);
    p.y = b.raw(y_elems * 2);
    p.residual = b.half_random(y_elems);
    std::vector<float> host_bias(c.c_out, 0.1f), host_stats(size_t(c.n) * 32 * 2, 0.5f), host_gn(c.c_in, 1.0f);
    float* bias = static_cast<float*>(b.raw(c.c_out * 4));
    RTVD_CUDA_CHECK(cudaMemcpy(bias, host_bias.data(), c.c_out * 4, cudaMemcpyHostToDevice));
    p.bias = bias;
    if (c.group_norm) {
      float* stats = static_cast<float*>(b.raw(host_stats.size() * 4));
      float* gn = static_cast<float*>(b.raw(c.c_in * 4));
      RTVD_CUDA_CHECK(cudaMemcpy(stats, host_stats.data(), host_stats.size() * 4, cudaMemcpyHostToDevice));
      RTVD_CUDA_CHECK(cudaMemcpy(gn, host_gn.data(), c.c_in * 4, cudaMemcpyHostToDevice));
      p.gn_stats = stats, p.gn_gamma = gn, p.gn_beta = gn, p.gn_groups = 32;
    }
    const double flops = 2.0 * c.n * c.h * c.w * double(c.c_out) * c.k * c.k * c.c_in;
    row(c.name, "custom", median_ms(ctx, runs, [&](int i) { p.x = xs[i % copies]; conv2d(p, ctx); }), flops, 0);
    // "custom" is what conv2d() runs (the wgmma kernel where it applies); "mma" the sm_80 kernel's choice.
    if (conv2d_sm90_can_implement(p, ctx)) {
      const Conv2dConfig mma = conv2d_choose_config(p, ctx);
      row(c.name, "mma", median_ms(ctx, runs, [&](int i) { p.x = xs[i % copies]; conv2d_with_config(p, mma, ctx); }), flops, 0);
    }
    const std::vector<Conv2dSm90Tile> tiles = conv2d_sm90_tiles(p, ctx);  // best-ranked first; the autotuner's four
    for (size_t t = 0; t < tiles.size() && t < 4; ++t)
      row(c.name, cat("wgmma ", tiles[t].name), median_ms(ctx, runs, [&](int i) { p.x = xs[i % copies]; conv2d_sm90(p, ctx, &tiles[t]); }), flops, 0);
#if RTVD_HAS_CUDNN
    const Conv2dCudnnPlan plan = make_conv2d_cudnn_plan(p, cudnn, ctx.workspace_bytes);
    row(c.name, "cudnn", median_ms(ctx, runs, [&](int i) { p.x = xs[i % copies]; conv2d_cudnn(p, plan, ctx); }), flops, 0);
#endif
  }

  // Flash attention and cuDNN's fused attention: self-attention from a fused QKV projection,
  // cross-attention over 77 tokens.
  const AttentionCase attns[] = {
      {"attn sd21 64x64 5x64 L4096", 2, 5, 64, 4096, 4096},
      {"attn sd21 32x32 10x64 L1024", 2, 10, 64, 1024, 1024},
      {"attn sd21 cross 4096x77", 2, 5, 64, 4096, 77},
      {"attn sd15 64x64 8x40 L4096", 2, 8, 40, 4096, 4096},
      {"attn sd15 32x32 8x80 L1024", 2, 8, 80, 1024, 1024},
      {"attn sd15 16x16 8x160 L256", 2, 8, 160, 256, 256},
      {"attn default 16x16 3x32 L256", 2, 3, 32, 256, 256},
  };
  for (const AttentionCase& a : attns) {
    Buffers b;
    const int C = a.heads * a.head_dim;
    const bool self = a.q_len == a.kv_len;
    const size_t q_elems = size_t(a.batch) * a.q_len * C * (self ? 3 : 1);
    const int copies = copies_for(q_elems * 2);
    std::vector<void*> qs;
    for (int i = 0; i < copies; ++i) qs.push_back(b.half_random(q_elems));
    void* kv = self ? nullptr : b.half_random(size_t(a.batch) * a.kv_len * 2 * C);
    AttentionParams p;
    p.batch = a.batch, p.heads = a.heads, p.head_dim = a.head_dim, p.q_len = a.q_len, p.kv_len = a.kv_len;
    p.q_stride = self ? 3 * C : C;
    p.k_stride = p.v_stride = self ? 3 * C : 2 * C;
    p.o_stride = C;
    p.scale = 1.0f / std::sqrt(float(a.head_dim));
    p.o = b.raw(size_t(a.batch) * a.q_len * C * 2);
    const double flops = 4.0 * a.batch * a.heads * double(a.q_len) * a.kv_len * a.head_dim;
    const auto inputs = [&](int i) {  // p reading the i-th copy of the inputs
      const auto* q = static_cast<const __half*>(qs[i % copies]);
      p.q = q;
      p.k = self ? q + C : static_cast<const __half*>(kv);
      p.v = self ? q + 2 * C : static_cast<const __half*>(kv) + C;
      return p;
    };
    // "flash" is what attention() runs (the wgmma kernel where it applies); "flash mma" the sm_80 kernel.
    row(a.name, "flash", median_ms(ctx, runs, [&](int i) { attention(inputs(i), ctx); }), flops, 0);
    if (attention_sm90_can_implement(inputs(0), ctx))
      row(a.name, "flash mma", median_ms(ctx, runs, [&](int i) { attention(inputs(i), ctx, FlashKernel::mma_sync); }), flops, 0);
#if RTVD_HAS_CUDNN
    try {
      const AttentionCudnnPlan plan = make_attention_cudnn_plan(p, cudnn);
      if (plan.workspace_bytes > ctx.workspace_bytes) fail("needs ", plan.workspace_bytes, " bytes of workspace");
      row(a.name, "cudnn", median_ms(ctx, runs, [&](int i) { attention_cudnn(inputs(i), plan, ctx); }), flops, 0);
    } catch (const Error& e) {
      std::printf("%-28s %-8s %s\n", a.name, "cudnn", e.what());  // no engine for this shape: said, not fatal
      out["results"].push_back({{"case", a.name}, {"impl", "cudnn"}, {"refused", e.what()}});
    }
#endif
  }
#if RTVD_HAS_CUDNN
  cudnnDestroy(cudnn);
#endif

  // The last sampler step fused with the blend and the RGBA8 conversion: bytes read + written.
  for (int side : {512, 1024, 2048}) {
    Buffers b;
    const size_t count = size_t(side) * side * 3;
    DenoiseBlendParams p;
    p.v = b.half_random(2 * count);
    p.x = static_cast<float*>(b.raw(count * 4));
    p.prev = static_cast<float*>(b.raw(count * 4));
    RTVD_CUDA_CHECK(cudaMemset(p.x, 0, count * 4));
    RTVD_CUDA_CHECK(cudaMemset(p.prev, 0, count * 4));
    p.rgba = static_cast<uint8_t*>(b.raw(size_t(side) * side * 4));
    p.h = p.w = side, p.c = 3, p.batch = 2, p.guidance = 3.0f, p.dt = 0.25f, p.blend = 0.5f;
    const double bytes = count * (2.0 * 2 + 4 + 4 + 4 + 4) + double(side) * side * 4;
    row("denoise_blend " + std::to_string(side) + "^2x3", "custom", median_ms(ctx, runs, [&](int) { denoise_blend(p, ctx); }), 0, bytes);
  }

  // GroupNorm at the SD U-Net's levels (batch 2, 32 groups): statistics alone (before a custom conv) and
  // statistics + normalise + SiLU (a cuDNN conv's pre-pass, the transformer's norm). Latency-bound at these
  // sizes: the launch and the grid-wide wait count as much as the bytes.
  for (const auto& [side, c] : std::vector<std::pair<int, int>>{{64, 320}, {64, 640}, {32, 640}, {16, 1280}, {8, 1280}}) {
    Buffers b;
    const size_t count = size_t(2) * side * side * c;
    const int copies = copies_for(count * 4);
    std::vector<void*> xs(copies);
    for (void*& x : xs) x = b.half_random(count);
    GroupNormParams p;
    p.stats = static_cast<float*>(b.raw(2 * 32 * 2 * sizeof(float)));
    p.gamma = static_cast<const float*>(b.raw(c * sizeof(float)));
    p.beta = static_cast<const float*>(b.raw(c * sizeof(float)));
    RTVD_CUDA_CHECK(cudaMemset(const_cast<float*>(p.gamma), 0, c * sizeof(float)));
    RTVD_CUDA_CHECK(cudaMemset(const_cast<float*>(p.beta), 0, c * sizeof(float)));
    p.n = 2, p.hw = side * side, p.c = c, p.groups = 32;
    const std::string shape = cat(side, "x", side, "x", c);
    row("group_norm stats " + shape, "custom", median_ms(ctx, runs, [&](int i) { p.x = xs[i % copies]; group_norm(p, ctx); }), 0,
        count * 2.0);
    p.y = b.raw(count * 2);
    p.act = Activation::Silu;
    row("group_norm+silu " + shape, "custom", median_ms(ctx, runs, [&](int i) { p.x = xs[i % copies]; group_norm(p, ctx); }), 0,
        count * 4.0);
  }

  cublasLtDestroy(ctx.cublaslt);
  cudaStreamDestroy(ctx.stream);
  return out;
}

}  // namespace rtvd
