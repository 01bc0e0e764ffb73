// layer_norm on the CPU: per row, mean and then variance around it (two passes over a row that is in
// L1), float64 sums, biased variance as torch.nn.LayerNorm.
#include "kernels/layer_norm/layer_norm.h"

#include <cmath>

#include "kernels/common/cpu_threading.h"

namespace rtvd {

void layer_norm_cpu(const LayerNormParams& p) {
  const auto* x = static_cast<const float*>(p.x);
  auto* y = static_cast<float*>(p.y);
  const int c = p.c;
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(c)) if (int64_t(p.rows) * c >= cpu::kParallelElements)
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < c; ++i) sum += xr[i];
    const double mean = sum / c;
    double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
    for (int i = 0; i < c; ++i) sum_sq += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = float(1.0 / std::sqrt(sum_sq / c + double(p.eps)));
    const float mean_f = float(mean);
    for (int i = 0; i < c; ++i) yr[i] = (xr[i] - mean_f) * rstd * p.gamma[i] + p.beta[i];
  }
}

}  // namespace rtvd
