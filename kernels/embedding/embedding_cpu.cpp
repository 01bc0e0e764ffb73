// The conditioning ops on the CPU: sinusoidal timestep embedding, class embedding lookup, FiLM combine.
#include "kernels/embedding/embedding.h"

#include <cmath>
#include <cstring>

#include "base/error.h"

namespace rtvd {

void timestep_embedding_cpu(const TimestepEmbeddingParams& p) {
  auto* y = static_cast<float*>(p.y);
  const int half = p.dim / 2;
  // fp32 throughout, in diffusers' order of operations, so that the arguments of sin/cos (up to
  // ~1000 rad) round exactly as PyTorch's do.
  const float log_max_period = -float(std::log(double(p.max_period)));
  const float denominator = float(double(half) - double(p.freq_shift));
  const auto embed = [&](float t, float* row) {
    for (int i = 0; i < half; ++i) {
      const float arg = t * std::exp(log_max_period * float(i) / denominator);
      const float s = std::sin(arg), c = std::cos(arg);
      row[i] = p.flip_sin_to_cos ? c : s;
      row[half + i] = p.flip_sin_to_cos ? s : c;
    }
    if (p.dim % 2) row[p.dim - 1] = 0.0f;  // diffusers pads an odd width with one zero
  };
  if (p.timesteps) {
    for (int image = 0; image < p.n; ++image) embed(p.timesteps[image], y + int64_t(image) * p.dim);
    return;
  }
  if (p.n == 0) return;
  embed(p.timestep, y);
  for (int image = 1; image < p.n; ++image)
    std::memcpy(y + int64_t(image) * p.dim, y, sizeof(float) * p.dim);
}

void embedding_cpu(const EmbeddingParams& p) {
  const auto* table = static_cast<const float*>(p.table);
  auto* y = static_cast<float*>(p.y);
  for (int i = 0; i < p.n; ++i) {
    const int32_t id = p.ids[i];
    if (id < 0 || id >= p.rows) fail("embedding_cpu: id ", id, " at ", i, " outside [0, ", p.rows, ")");
    const float* src = table + int64_t(id) * p.dim;
    float* dst = y + int64_t(i) * p.dim;
    if (p.accumulate) {
      for (int j = 0; j < p.dim; ++j) dst[j] += src[j];
    } else {
      std::memcpy(dst, src, sizeof(float) * p.dim);
    }
  }
}

void film_cpu(const FilmParams& p) {
  const auto* proj = static_cast<const float*>(p.proj);
  for (int image = 0; image < p.n; ++image) {
    const float* row = proj + int64_t(image) * p.proj_stride + p.proj_offset;
    float* bias = p.bias + int64_t(image) * p.c;
    for (int j = 0; j < p.c; ++j) {
      const float t = p.base_bias ? p.base_bias[j] : 0.0f;
      if (p.with_scale) {
        const float g = row[j], b = row[p.c + j];
        const float s = p.base_scale ? p.base_scale[j] : 1.0f;
        p.scale[int64_t(image) * p.c + j] = s * (1.0f + g);
        bias[j] = t * (1.0f + g) + b;
      } else {
        bias[j] = t + row[j];
      }
    }
  }
}

}  // namespace rtvd
