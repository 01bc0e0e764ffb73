// The noise walk against what the sampler needs of every frame: zero-mean, unit-variance Gaussian noise,
// over long walks (a shrinking variance would wash frames out as the walk goes on), exactly the key noise
// at each key, and smooth from frame to frame.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/rng.h"
#include "pipeline/samplers/noise_walk.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr size_t kCount = 64 * 64 * 3;  // the default model's frame

struct Moments {
  double mean = 0, variance = 0, within_one = 0;  // within_one: share of |x| < 1
};

Moments moments(const std::vector<float>& x) {
  Moments m;
  for (const float v : x) m.mean += v, m.within_one += std::abs(v) < 1.0f;
  m.mean /= double(x.size());
  for (const float v : x) m.variance += (v - m.mean) * (v - m.mean);
  m.variance /= double(x.size() - 1);
  m.within_one /= double(x.size());
  return m;
}

// 1000 frames, every one a standard normal sample: mean, variance and the share within one sigma each within
// 5 standard errors of N(0, 1)'s (about one false failure in a million frames).
TEST(NoiseWalk, EveryFrameOfALongWalkIsUnitGaussian) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const uint64_t seed = rng.gen();
  const int period = rng.integer(2, 48);
  SCOPED_TRACE(testing::Message() << "period " << period);
  const double n = double(kCount), p1 = std::erf(1.0 / std::sqrt(2.0));
  const double mean_tol = 5 / std::sqrt(n), var_tol = 5 * std::sqrt(2 / n);
  const double p1_tol = 5 * std::sqrt(p1 * (1 - p1) / n);
  std::vector<float> x = test::poisoned(kCount);
  double variance_sum = 0;
  for (int64_t frame = 0; frame < 1000; ++frame) {
    noise_walk(seed, frame, period, x.data(), kCount);
    const Moments m = moments(x);
    ASSERT_NEAR(m.mean, 0.0, mean_tol) << "frame " << frame;
    ASSERT_NEAR(m.variance, 1.0, var_tol) << "frame " << frame;
    ASSERT_NEAR(m.within_one, p1, p1_tol) << "frame " << frame;
    variance_sum += m.variance;
  }
  // No drift either: the average over the walk is 1 to within its (correlated) frames' error.
  EXPECT_NEAR(variance_sum / 1000, 1.0, var_tol);
}

double rms_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += double(a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(sum / double(a.size()));
}

TEST(NoiseWalk, KeyFramesAreTheKeyNoisesAndStepsAreSmall) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const uint64_t seed = rng.gen();
  const int period = rng.integer(8, 48);
  SCOPED_TRACE(testing::Message() << "period " << period);
  std::vector<float> x(kCount), prev(kCount);
  double largest_step = 0;
  for (int64_t frame = 0; frame <= 3 * period; ++frame) {
    noise_walk(seed, frame, period, x.data(), kCount);
    if (frame % period == 0)
      for (size_t i = 0; i < kCount; i += 97) ASSERT_EQ(x[i], gaussian_noise(seed, frame / period, i)) << i;
    if (frame > 0) largest_step = std::max(largest_step, rms_difference(x, prev));
    prev = x;
  }
  // From key to key the noise turns a quarter circle (pi/2) in `period` frames, smoothstep-eased: at most
  // 1.5x the average speed, so no frame moves more than about 1.5 * (pi/2) / period in RMS.
  EXPECT_LT(largest_step, 1.6 * (M_PI / 2) / period);
}

}  // namespace
}  // namespace rtvd
