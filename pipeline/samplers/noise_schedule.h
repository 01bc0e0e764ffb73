// The pieces of diffusers' schedulers that are not specific to one sampler: the training noise schedule
// (alphas_cumprod) and the numpy calls their set_timesteps are written with, reproduced to the last bit where
// the result is rounded to an integer or to fp32 (linspace, arange, round, interp), so that rtvd's timesteps
// equal diffusers'.
#pragma once
#include <vector>

#include "pipeline/samplers/scheduler_config.h"

namespace rtvd {

// alphas_cumprod[t] = prod_{s <= t} (1 - beta_s), t in [0, n), in double: betas linear from beta_start to
// beta_end (Linear), or their square roots (ScaledLinear), as torch.linspace(..., n) spaces them.
std::vector<double> alphas_cumprod(BetaSchedule schedule, double beta_start, double beta_end, int n);

// numpy.linspace(start, stop, num, endpoint): i * step + start, step = (stop - start) / (num - 1) (endpoint)
// or / num; with endpoint the last value is exactly stop; num 1 gives {start}.
std::vector<double> numpy_linspace(double start, double stop, int num, bool endpoint);

// numpy.arange(start, 0, -step) for start > 0: ceil(start / step) values start + i * d, where d is
// (start - step) - start as numpy's fill computes it. The count can be one more than start / step suggests
// (1000 / (1000 / 61.0) is just over 61): diffusers' "trailing" then has one timestep too many.
std::vector<double> numpy_arange_down(double start, double step);

// numpy.round: to the nearest integer, halves to even.
double numpy_round(double x);

// numpy.interp(x, [0, 1, ..., n-1], fp): linear between neighbours, clamped to fp's ends outside.
double numpy_interp(double x, const std::vector<double>& fp);

}  // namespace rtvd
