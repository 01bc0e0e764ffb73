// group_norm on the CPU: statistics per (image, group) with float64 sums (biased variance), then an
// optional normalise + affine + activation pass over every pixel.
#include "kernels/group_norm/group_norm.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/common/cpu_threading.h"
#include "kernels/common/cpu_vector_math.h"

namespace rtvd {
namespace {

// One pass with float64 sums: the cancellation in E[x^2] - E[x]^2 then costs digits only beyond fp32
// resolution (unless |mean| exceeds ~1e4 standard deviations), and x is read once.
void compute_stats(const GroupNormParams& p, const float* x) {
  const int per_group = p.c / p.groups;
  const int64_t tasks = int64_t(p.n) * p.groups;
#pragma omp parallel for schedule(dynamic, 1) if (tasks * p.hw * per_group >= cpu::kParallelElements)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t image = task / p.groups;
    const float* base = x + image * p.hw * p.c + (task % p.groups) * per_group;
    double sum = 0.0, sum_sq = 0.0;
    for (int64_t px = 0; px < p.hw; ++px) {
      const float* xs = base + px * p.c;
#pragma omp simd reduction(+ : sum, sum_sq)
      for (int i = 0; i < per_group; ++i) {
        sum += xs[i];
        sum_sq += double(xs[i]) * xs[i];
      }
    }
    const double count = double(p.hw) * per_group;
    const double mean = sum / count;
    const double var = std::max(sum_sq / count - mean * mean, 0.0);
    p.stats[2 * task] = float(mean);
    p.stats[2 * task + 1] = float(1.0 / std::sqrt(var + double(p.eps)));
  }
}

void normalize(const GroupNormParams& p, const float* x, float* y) {
  const int per_group = p.c / p.groups;
  const int64_t pixels = int64_t(p.n) * p.hw;
  const bool silu = p.act == Activation::Silu;
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(p.c)) if (pixels * p.c >= cpu::kParallelElements)
  for (int64_t px = 0; px < pixels; ++px) {
    const float* stats = p.stats + (px / p.hw) * p.groups * 2;
    const float* xr = x + px * p.c;
    float* yr = y + px * p.c;
    for (int g = 0; g < p.groups; ++g) {
      const float mean = stats[2 * g], rstd = stats[2 * g + 1];
      for (int i = g * per_group; i < (g + 1) * per_group; ++i)
        yr[i] = (xr[i] - mean) * rstd * p.gamma[i] + p.beta[i];
    }
    if (silu) {
#pragma omp simd
      for (int i = 0; i < p.c; ++i) yr[i] = cpu::silu_fast(yr[i]);
    }
  }
}

}  // namespace

void group_norm_cpu(const GroupNormParams& p) {
  if (p.act != Activation::None && p.act != Activation::Silu)
    fail("group_norm_cpu: act must be None or Silu, not ", activation_name(p.act));
  const auto* x = static_cast<const float*>(p.x);
  compute_stats(p, x);
  if (p.y) normalize(p, x, static_cast<float*>(p.y));
}

}  // namespace rtvd
