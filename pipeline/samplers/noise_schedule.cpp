#include "pipeline/samplers/noise_schedule.h"

#include <cmath>

namespace rtvd {

std::vector<double> alphas_cumprod(BetaSchedule schedule, double beta_start, double beta_end, int n) {
  const bool scaled = schedule == BetaSchedule::ScaledLinear;
  // diffusers: torch.linspace(beta_start ** 0.5, beta_end ** 0.5, n) ** 2 for scaled_linear
  const std::vector<double> spaced = scaled ? numpy_linspace(std::sqrt(beta_start), std::sqrt(beta_end), n, true)
                                            : numpy_linspace(beta_start, beta_end, n, true);
  std::vector<double> out(n);
  double product = 1.0;
  for (int t = 0; t < n; ++t) {
    const double beta = scaled ? spaced[t] * spaced[t] : spaced[t];
    product *= 1.0 - beta;
    out[t] = product;
  }
  return out;
}

std::vector<double> numpy_linspace(double start, double stop, int num, bool endpoint) {
  const int div = endpoint ? num - 1 : num;
  std::vector<double> out(num, start);
  if (div <= 0) return out;
  const double step = (stop - start) / div;
  for (int i = 0; i < num; ++i) out[i] = i * step + start;
  if (endpoint && num > 1) out[num - 1] = stop;
  return out;
}

std::vector<double> numpy_arange_down(double start, double step) {
  const double count = std::ceil((0.0 - start) / -step);
  // numpy fills from its first two values: start, then start + i * ((start - step) - start).
  const double d = (start - step) - start;
  std::vector<double> out;
  for (int i = 0; i < int(count); ++i) out.push_back(i == 0 ? start : start + i * d);
  return out;
}

// numpy's rint; so is nearbyint in the default rounding mode (to nearest, ties to even), which rtvd never changes.
double numpy_round(double x) { return std::nearbyint(x); }

double numpy_interp(double x, const std::vector<double>& fp) {
  const int n = int(fp.size());
  if (x < 0) return fp.front();
  if (x >= n - 1) return fp.back();
  const int j = int(std::floor(x));  // xp = 0, 1, ...: the interval [j, j + 1) holding x
  if (x == j) return fp[j];
  const double slope = (fp[j + 1] - fp[j]) / double((j + 1) - j);
  return slope * (x - j) + fp[j];
}

}  // namespace rtvd
