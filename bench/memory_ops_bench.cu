// The bandwidth-bound ops, each production case of its table through its launcher, in GB/s against the copy
// ceiling. Bytes are what the op must read and write at least once (fp16 activations, fp32 vectors and
// sampler state); re-reads (a GroupNorm reads x twice) count once.
#include <string>
#include <utility>

#include "bench/bench_table.cuh"
#include "kernels/canny/canny.cuh"
#include "kernels/canny/canny_cases.h"
#include "kernels/cast/cast.cuh"
#include "kernels/cast/cast_cases.h"
#include "kernels/denoise/denoise.cuh"
#include "kernels/denoise/denoise_cases.h"
#include "kernels/elementwise/elementwise.cuh"
#include "kernels/elementwise/elementwise_cases.h"
#include "kernels/embedding/embedding.cuh"
#include "kernels/embedding/embedding_cases.h"
#include "kernels/group_norm/group_norm.cuh"
#include "kernels/group_norm/group_norm_sm90.cuh"
#include "kernels/group_norm/group_norm_cases.h"
#include "kernels/layer_norm/layer_norm.cuh"
#include "kernels/layer_norm/layer_norm_cases.h"
#include "kernels/similarity/similarity.cuh"
#include "kernels/similarity/similarity_cases.h"

namespace rtvd::bench {
namespace {

// One row: `inputs` fp16 elements read, rotated through copies past L2, by run(i, input).
template <class Run>
void timed(Table& t, const char* op, const std::string& name, const char* impl, size_t inputs, double bytes,
           const Run& run) {
  if (!t.wants(op)) return;
  Buffers b;
  const int copies = copies_for(inputs * 2);
  std::vector<const void*> xs;
  for (int i = 0; i < copies; ++i) xs.push_back(b.half_random(inputs));
  const CudaContext& ctx = t.host().ctx();
  t.row(op, name, impl, t.median_ms(ctx, [&](int i) { run(xs[i % copies], ctx); }), 0, bytes);
}
template <class Run>
void timed(Table& t, const char* op, const std::string& name, size_t inputs, double bytes, const Run& run) {
  timed(t, op, name, "custom", inputs, bytes, run);
}

}  // namespace

void bench_memory_ops(Table& t) {
  for (const GroupNormCase& c : group_norm_cases()) {
    if (!c.production) continue;
    Buffers b;
    float* stats = static_cast<float*>(b.raw(c.stats() * 4));
    const float* gamma = b.float_random(c.c);
    void* y = c.stats_only ? nullptr : b.raw(c.elements() * 2);
    for (const auto& [kernel, impl] : {std::pair{GroupNormKernel::Grid, "grid"}, std::pair{GroupNormKernel::Cluster, "clusters"}}) {
      std::string why;
      if (kernel == GroupNormKernel::Cluster &&
          !group_norm_cluster_can_run(group_norm_params(c, nullptr, y, stats, gamma, gamma), t.host().ctx(), &why)) {
        t.refused("group_norm", c.name, impl, why);
        continue;
      }
      timed(t, "group_norm", c.name, impl, c.elements(), c.elements() * (c.stats_only ? 2.0 : 4.0),
            [&, kernel = kernel](const void* x, const CudaContext& ctx) {
              group_norm(group_norm_params(c, x, y, stats, gamma, gamma), ctx, kernel);
            });
    }
  }
  for (const LayerNormCase& c : layer_norm_cases()) {
    if (!c.production) continue;
    Buffers b;
    void* y = b.raw(c.elements() * 2);
    const float* gamma = b.float_random(c.c);
    timed(t, "layer_norm", c.name, c.elements(), c.elements() * 4.0, [&](const void* x, const CudaContext& ctx) {
      layer_norm(layer_norm_params(c, x, y, gamma, gamma), ctx);
    });
  }
  for (const GegluCase& c : geglu_cases()) {
    if (!c.production) continue;
    Buffers b;
    void* y = b.raw(size_t(c.rows) * c.f * 2);
    timed(t, "geglu", c.name, size_t(c.rows) * 2 * c.f, c.rows * 3.0 * c.f * 2, [&](const void* x, const CudaContext& ctx) {
      geglu(geglu_params(c, x, y), ctx);
    });
  }
  for (const SiluCase& c : silu_cases()) {
    if (!c.production) continue;
    Buffers b;
    void* y = b.raw(c.count * 2);
    timed(t, "silu", c.name, c.count, c.count * 4.0, [&](const void* x, const CudaContext& ctx) { silu(silu_params(c, x, y), ctx); });
  }
  for (const Upsample2xCase& c : upsample2x_cases()) {
    if (!c.production) continue;
    Buffers b;
    const size_t in = size_t(c.n) * c.h * c.w * c.c;
    void* y = b.raw(in * 4 * 2);
    timed(t, "upsample2x", c.name, in, in * 5.0 * 2, [&](const void* x, const CudaContext& ctx) {
      upsample2x(upsample2x_params(c, x, y), ctx);
    });
  }
  for (const ConcatCase& c : concat_cases()) {
    if (!c.production) continue;
    Buffers b;
    const void* other = b.half_random(size_t(c.pixels) * c.cb);
    void* y = b.raw(size_t(c.pixels) * (c.ca + c.cb) * 2);
    timed(t, "concat", c.name, size_t(c.pixels) * c.ca, c.pixels * (c.ca + c.cb) * 4.0, [&](const void* a, const CudaContext& ctx) {
      concat(concat_params(c, a, other, y), ctx);
    });
  }
  for (const ScaleActivationCase& c : scale_activation_cases()) {
    if (!c.production) continue;
    Buffers b;
    void* y = b.raw(c.count * 2);
    const void* residual = c.with_residual ? b.half_random(c.count) : nullptr;
    timed(t, "scale_activation", c.name, c.count, c.count * (c.with_residual ? 6.0 : 4.0),
          [&](const void* x, const CudaContext& ctx) { scale_activation(scale_activation_params(c, x, y, residual), ctx); });
  }
  for (const TimestepEmbeddingCase& c : timestep_embedding_cases()) {
    if (!c.production) continue;
    Buffers b;
    void* y = b.raw(size_t(c.n) * c.dim * 2);
    timed(t, "timestep_emb", c.name, 1, c.n * c.dim * 2.0, [&](const void*, const CudaContext& ctx) {
      timestep_embedding(timestep_embedding_params(c, 500.0f, y), ctx);
    });
  }
  for (const EmbeddingCase& c : embedding_cases()) {
    if (!c.production) continue;
    Buffers b;
    std::vector<int32_t> host_ids(c.n);
    for (int i = 0; i < c.n; ++i) host_ids[i] = int32_t((i * 7919) % c.rows);
    auto* ids = static_cast<int32_t*>(b.raw(c.n * 4));
    RTVD_CUDA_CHECK(cudaMemcpy(ids, host_ids.data(), c.n * 4, cudaMemcpyHostToDevice));
    void* y = b.half_random(size_t(c.n) * c.dim);
    timed(t, "embedding", c.name, size_t(c.rows) * c.dim, c.n * c.dim * (c.accumulate ? 6.0 : 4.0),
          [&](const void* table, const CudaContext& ctx) { embedding(embedding_params(c, table, ids, y), ctx); });
  }
  for (const FilmCase& c : film_cases()) {
    if (!c.production) continue;
    Buffers b;
    const float* base = b.float_random(c.c);
    float* scale = static_cast<float*>(b.raw(size_t(c.n) * c.c * 4));
    float* bias = static_cast<float*>(b.raw(size_t(c.n) * c.c * 4));
    const int width = c.with_scale ? 2 * c.c : c.c;
    timed(t, "film", c.name, size_t(c.n) * c.proj_stride, c.n * width * (2.0 + 4.0), [&](const void* proj, const CudaContext& ctx) {
      film(film_params(c, proj, base, base, scale, bias), ctx);
    });
  }
  for (const CastCase& c : cast_cases()) {
    if (!c.production) continue;
    Buffers b;
    const float* x = b.float_random(c.count);
    void* y = b.raw(size_t(c.copies) * c.count * 2 + 16);
    timed(t, "cast", c.name, 1, c.count * (4.0 + 2.0 * c.copies), [&](const void*, const CudaContext& ctx) {
      cast(cast_params(c, x, y), ctx);
    });
  }
  for (const SimilarityCase& c : similarity_cases()) {
    if (!c.production) continue;
    Buffers b;
    const float* x = b.float_random(c.count);
    float* sums = static_cast<float*>(b.raw(size_t(c.chunks) * 3 * 4));
    timed(t, "similarity", c.name, size_t(c.count), c.count * (4.0 + 2.0), [&](const void* y, const CudaContext& ctx) {
      similarity(similarity_params(c, x, y, sums), ctx);
    });
  }
  for (const CannyCase& c : canny_cases()) {
    if (!c.production) continue;
    Buffers b;
    const float* x = b.float_random(size_t(c.pixels()) * c.c);  // noise: peaks everywhere, hysteresis's busiest
    auto* thresholds = static_cast<int32_t*>(b.raw(2 * sizeof(int32_t)));
    const int32_t low_high[2] = {c.low, c.high};
    RTVD_CUDA_CHECK(cudaMemcpy(thresholds, low_high, sizeof(low_high), cudaMemcpyHostToDevice));
    float* y = static_cast<float*>(b.raw(size_t(c.pixels()) * kCannyOutChannels * 4));
    const CannyParams p = canny_params(c, x, thresholds, y, nullptr);
    void* workspace = b.raw(canny_workspace_bytes(p));
    timed(t, "canny", c.name, 1, c.pixels() * (4.0 * c.c + 4.0 * kCannyOutChannels), [&](const void*, const CudaContext& ctx) {
      canny(canny_params(c, x, thresholds, y, workspace), ctx);
    });
  }
  for (const GuidanceStepCase& c : guidance_step_cases()) {
    if (!c.production) continue;
    Buffers b;
    float* x = b.float_random(c.count);
    const float* noise = c.noise ? b.float_random(c.count) : nullptr;
    const int copies = c.copies > 0 ? c.copies : c.batch;
    void* model_in = c.model_in ? b.raw(size_t(copies) * c.count * 2) : nullptr;
    const double bytes = c.count * ((c.v ? 2.0 * c.batch : 0.0) + 8.0 + (c.noise ? 4.0 : 0.0) +
                                    (c.model_in ? 2.0 * copies : 0.0));
    const StepScalars s{.guidance = 3.0f, .x_coef = 0.98f, .out_coef = -0.25f, .noise_coef = 0.1f, .input_scale = 0.7f};
    timed(t, "guidance_step", c.name, size_t(c.batch) * c.count, bytes, [&](const void* v, const CudaContext& ctx) {
      guidance_step(guidance_step_params(c, v, x, noise, model_in, s), ctx);
    });
  }
  for (const DenoiseBlendCase& c : denoise_blend_cases()) {
    if (!c.production) continue;
    Buffers b;
    const size_t count = size_t(c.h) * c.w * c.c;
    float* x = b.float_random(count);
    float* prev = b.float_random(count);
    auto* rgba = c.rgba ? static_cast<uint8_t*>(b.raw(size_t(c.h) * c.w * 4)) : nullptr;
    auto* nonfinite = static_cast<int32_t*>(b.raw(sizeof(int32_t)));  // as every frame has: its reset included
    const double bytes = count * (2.0 * c.batch + (c.x ? 8.0 : 0.0) + (c.first ? 4.0 : 8.0)) + (c.rgba ? c.h * c.w * 4.0 : 0.0);
    const StepScalars s{.guidance = 3.0f, .x_coef = 1.0f, .out_coef = -0.25f};
    timed(t, "denoise_blend", c.name, size_t(c.batch) * count, bytes, [&](const void* v, const CudaContext& ctx) {
      denoise_blend(denoise_blend_params(c, v, x, prev, rgba, nonfinite, s, 0.5f), ctx);
    });
  }
}

}  // namespace rtvd::bench
