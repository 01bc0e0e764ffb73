// The memory-bound ops of the U-Net and the autoencoders on the CPU: GEGLU, SiLU, nearest 2x upsampling,
// channel concat, scale-activation-scale.
#include "kernels/elementwise/elementwise.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "kernels/common/cpu_cancel.h"
#include "kernels/common/cpu_threading.h"
#include "kernels/common/cpu_vector_math.h"

namespace rtvd {

void geglu_cpu(const GegluParams& p) {
  const auto* x = static_cast<const float*>(p.x);
  auto* y = static_cast<float*>(p.y);
  const int f = p.f;
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(f)) if (int64_t(p.rows) * f >= cpu::kParallelElements)
  for (int64_t r = 0; r < p.rows; ++r) {
    // erfc is a libm call per element: at 512x512 one GEGLU takes 0.1-0.5 s, long enough to poll per row
    // (cpu_cancel.h); a poll costs a few ns against a row's microseconds.
    if (cpu::cancelled()) continue;
    const float* hidden = x + r * 2 * f;
    const float* gate = hidden + f;
    float* yr = y + r * f;
    // Exact GELU: diffusers' GEGLU calls F.gelu without the tanh approximation. 1 + erf(z) is written
    // erfc(-z), which keeps full relative precision for negative gates where 1 + erf(z) cancels.
    for (int i = 0; i < f; ++i) {
      const float g = gate[i];
      yr[i] = hidden[i] * (0.5f * g * std::erfc(-g / std::numbers::sqrt2_v<float>));
    }
  }
}

void silu_cpu(const SiluParams& p) {
  const auto* x = static_cast<const float*>(p.x);
  auto* y = static_cast<float*>(p.y);
#pragma omp parallel for simd schedule(dynamic, cpu::chunk_for(1)) if (p.count >= cpu::kParallelElements)
  for (int64_t i = 0; i < p.count; ++i) y[i] = cpu::silu_fast(x[i]);
}

void upsample2x_cpu(const Upsample2xParams& p) {
  const auto* x = static_cast<const float*>(p.x);
  auto* y = static_cast<float*>(p.y);
  const int64_t c = p.c, in_row = int64_t(p.w) * c, out_row = 2 * in_row;
  const int64_t rows = int64_t(p.n) * p.h;  // input rows; image boundaries need no special case
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(4 * in_row)) if (rows * in_row >= cpu::kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = x + r * in_row;
    float* dst = y + 2 * r * out_row;  // output rows 2r and 2r + 1
    for (int ix = 0; ix < p.w; ++ix) {
      std::memcpy(dst + 2 * ix * c, src + ix * c, sizeof(float) * c);
      std::memcpy(dst + (2 * ix + 1) * c, src + ix * c, sizeof(float) * c);
    }
    std::memcpy(dst + out_row, dst, sizeof(float) * out_row);
  }
}

void concat_cpu(const ConcatParams& p) {
  const auto* a = static_cast<const float*>(p.a);
  const auto* b = static_cast<const float*>(p.b);
  auto* y = static_cast<float*>(p.y);
  const int64_t ca = p.ca, cb = p.cb, cy = ca + cb;
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(cy)) if (p.pixels * cy >= cpu::kParallelElements)
  for (int64_t px = 0; px < p.pixels; ++px) {
    std::memcpy(y + px * cy, a + px * ca, sizeof(float) * ca);
    std::memcpy(y + px * cy + ca, b + px * cb, sizeof(float) * cb);
  }
}

void scale_activation_cpu(const ScaleActivationParams& p) {
  const auto* x = static_cast<const float*>(p.x);
  auto* y = static_cast<float*>(p.y);
  const auto* r = static_cast<const float*>(p.residual);
  const float a = p.in_scale, b = p.in_shift, s = p.out_scale;
  const Activation act = p.act;
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(1)) if (p.count >= cpu::kParallelElements)
  for (int64_t i = 0; i < p.count; ++i) {
    const float v = s * apply_activation(a * x[i] + b, act);
    y[i] = r ? v + r[i] : v;
  }
}

}  // namespace rtvd
