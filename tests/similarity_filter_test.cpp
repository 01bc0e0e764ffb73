// The similarity filter (pipeline/similarity_filter.h, FrameSettings::skip_similar) on each backend (the GPU
// case skips without a device): the default model's img2img at 32x32, sources drawn fresh every run.
//   - a still picture with codec-like noise is skipped (all but its first frame) and each skipped frame
//     presents exactly the frame before, through image() and take_image();
//   - a small patch that moves a pixel a frame is never skipped, and its frames are those the filter off
//     renders;
//   - the filter off renders every frame;
//   - the decisions are those of the measure in float64 against the last *rendered* source (a slow drift adds
//     up until a frame renders), and the rendered frames are those an engine without the filter renders from
//     the rendered sources alone;
//   - a frame cancelled after the filter let it through does not count as rendered (CPU);
//   - the measure at 512x512: a 32x32 patch moved one pixel is below kDefaultSkipSimilar, codec-like noise
//     above it (the numbers behind the default).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/similarity/similarity.h"
#include "pipeline/backends/cancel.h"
#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "pipeline/similarity_filter.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr int kSide = 32;
constexpr size_t kCount = size_t(kSide) * kSide * 3;
constexpr float kLevel = 2.0f / 255.0f;  // one step of an 8-bit channel in [-1, 1]

// A picture in [-1, 0.3] (room for a bright patch), and codec-like noise: Gaussian, one level rms.
std::vector<float> picture(test::Rng& rng) { return rng.vector(kCount, -1.0f, 0.3f); }
std::vector<float> with_noise(std::vector<float> v, test::Rng& rng) {
  for (float& x : v) x += kLevel * rng.normal();
  return v;
}
// A 6x6 patch of 1.0 at column x (wrapping), rows 10 to 15.
std::vector<float> with_patch(std::vector<float> v, int x) {
  for (int r = 10; r < 16; ++r)
    for (int c = 0; c < 6; ++c)
      for (int ch = 0; ch < 3; ++ch) v[(size_t(r) * kSide + (x + c) % kSide) * 3 + ch] = 1.0f;
  return v;
}

// similarity_filter.h's measure from its definition, in float64: 128 bands, the worst one's squared
// difference against the mean band's energy.
double naive_similarity(const std::vector<float>& x, const std::vector<float>& y) {
  const int chunks = kSimilarityChunks;
  const size_t size = (x.size() + chunks - 1) / chunks;
  std::vector<double> band(chunks, 0.0);
  double energy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    band[i / size] += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    energy += double(x[i]) * x[i] + double(y[i]) * y[i];
  }
  const double worst = *std::max_element(band.begin(), band.end());
  return worst == 0 ? 1.0 : 1.0 - double(x.size()) / double(size) * worst / energy;
}

class SimilarityFilterOn : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (GetParam() == "cuda" && cuda_devices(&why).empty()) GTEST_SKIP() << why;
    o.device = device_kind_named(GetParam());
    if (o.device == DeviceKind::Cuda) o.kernels = KernelFamily::Custom;  // the same kernels in every engine
    o.width = o.height = kSide;
    s.seed = rng.gen();
    s.steps = 1;
    s.strength = 0.5f;
    s.skip_similar = kDefaultSkipSimilar;
  }
  // Each source through a fresh engine at settings t; the presented frames, and which were skipped.
  struct Run {
    std::vector<std::vector<uint8_t>> frames;
    std::vector<bool> skipped;
  };
  Run run(const FrameSettings& t, const std::vector<std::vector<float>>& sources) {
    Engine engine(o);
    engine.configure(t, true);
    Run r;
    for (const std::vector<float>& source : sources) {
      engine.step(&source);
      r.skipped.push_back(engine.skipped());
      r.frames.push_back(engine.image().pixels);
    }
    EXPECT_EQ(engine.skipped_frames(), std::count(r.skipped.begin(), r.skipped.end(), true));
    return r;
  }
  // Equal on the CPU; within one level on the GPU, whose fp16 frames may round apart between plans.
  void expect_same_frame(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    if (o.device == DeviceKind::Cpu) {
      EXPECT_EQ(a, b) << what;
      return;
    }
    int most = 0;
    for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(int(a[i]) - int(b[i])));
    EXPECT_LE(most, 1) << what;
  }
  test::Rng rng;
  EngineOptions o;
  FrameSettings s;
};

TEST_P(SimilarityFilterOn, AStillPictureWithCodecNoiseIsSkippedAndPresentsTheFrameBefore) {
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<float> still = picture(rng);
  Engine engine(o);
  engine.configure(s, true);
  const int frames = 20;
  std::vector<uint8_t> before;
  for (int i = 0; i < frames; ++i) {
    const std::vector<float> source = with_noise(still, rng);
    engine.step(&source);
    engine.queue_image();
    const std::vector<uint8_t> taken = engine.take_image().pixels;
    EXPECT_EQ(engine.image().pixels, taken) << "frame " << i;
    EXPECT_EQ(engine.skipped(), i > 0) << "frame " << i;
    if (engine.skipped()) EXPECT_EQ(taken, before) << "skipped frame " << i << " presents the frame before";
    before = taken;
  }
  EXPECT_GE(engine.skipped_frames(), frames * 9 / 10);
}

TEST_P(SimilarityFilterOn, AMovingPatchIsNeverSkippedAndRendersAsWithoutTheFilter) {
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<float> still = picture(rng);
  std::vector<std::vector<float>> sources;
  const int start = rng.integer(0, kSide - 1);
  for (int i = 0; i < 12; ++i) sources.push_back(with_noise(with_patch(still, start + i), rng));
  const Run filtered = run(s, sources);
  EXPECT_EQ(std::count(filtered.skipped.begin(), filtered.skipped.end(), true), 0);
  FrameSettings off = s;
  off.skip_similar = 0;
  const Run unfiltered = run(off, sources);
  for (size_t i = 0; i < sources.size(); ++i)
    expect_same_frame(filtered.frames[i], unfiltered.frames[i], "frame " + std::to_string(i));
}

TEST_P(SimilarityFilterOn, OffRendersEveryFrameOfTheSameSource) {
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<float> still = picture(rng);
  FrameSettings off = s;
  off.skip_similar = 0;
  const Run r = run(off, std::vector<std::vector<float>>(6, still));
  EXPECT_EQ(std::count(r.skipped.begin(), r.skipped.end(), true), 0);
  for (size_t i = 1; i < r.frames.size(); ++i)
    EXPECT_NE(r.frames[i], r.frames[i - 1]) << "frame " << i << " rendered: the noise walk moved";
}

// A patch that brightens slowly: each source is within the threshold of the one before, so a filter that
// compared with the last source seen would skip them all; the drift since the last rendered one adds up.
// The decisions must be the float64 measure's against the last rendered source, and the rendered frames
// those that an engine without the filter renders from the rendered sources alone.
TEST_P(SimilarityFilterOn, DriftAddsUpAgainstTheLastRenderedSource) {
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<float> still = picture(rng);
  const int x = rng.integer(0, kSide - 1);
  std::vector<std::vector<float>> sources;
  for (int i = 0; i < 24; ++i) {
    std::vector<float> v = with_patch(still, x);
    for (int r = 10; r < 16; ++r)
      for (int c = 0; c < 6; ++c)
        for (int ch = 0; ch < 3; ++ch) v[(size_t(r) * kSide + (x + c) % kSide) * 3 + ch] = -1.0f + 0.02f * i;
    sources.push_back(v);
  }
  for (size_t i = 1; i < sources.size(); ++i)
    ASSERT_GE(naive_similarity(sources[i], sources[i - 1]), s.skip_similar) << "the drift of one frame is small";

  std::vector<bool> expected;
  size_t last = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const bool skip = i > 0 && naive_similarity(sources[i], sources[last]) >= s.skip_similar;
    if (!skip) last = i;
    expected.push_back(skip);
  }
  ASSERT_GT(std::count(expected.begin() + 1, expected.end(), false), 1) << "the drift renders frames";

  const Run filtered = run(s, sources);
  EXPECT_EQ(filtered.skipped, expected);
  std::vector<std::vector<float>> rendered_sources;
  for (size_t i = 0; i < sources.size(); ++i)
    if (!expected[i]) rendered_sources.push_back(sources[i]);
  FrameSettings off = s;
  off.skip_similar = 0;
  const Run unfiltered = run(off, rendered_sources);
  size_t k = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!expected[i]) ++k;
    ASSERT_GT(k, 0u);
    expect_same_frame(filtered.frames[i], unfiltered.frames[k - 1], "frame " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SimilarityFilterOn, testing::Values("cpu", "cuda"));

// A frame cancelled after the filter let it through (the CPU backend stops a frame when cancellation is
// requested, backends/cancel.h) was never shown: its source must not count as the last rendered one. Source
// A renders; B (the patch moved) is cancelled; B again must render, as an engine without the filter renders
// A then B, not be skipped as similar to the cancelled B and show A's frame.
TEST(SimilarityFilter, ACancelledFrameDoesNotCountAsRendered) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.width = o.height = kSide;
  FrameSettings s;
  s.seed = rng.gen();
  s.steps = 1;
  s.skip_similar = kDefaultSkipSimilar;
  const std::vector<float> still = picture(rng);
  const std::vector<float> a = with_patch(still, 0), b = with_patch(still, 12);

  Engine engine(o);
  engine.configure(s, true);
  engine.step(&a);
  clear_cancel();
  request_cancel();
  EXPECT_THROW(engine.step(&b), Cancelled);
  clear_cancel();
  engine.step(&b);
  EXPECT_FALSE(engine.skipped());
  const std::vector<uint8_t> got = engine.image().pixels;

  s.skip_similar = 0;
  Engine plain(o);
  plain.configure(s, true);
  plain.step(&a);
  EXPECT_EQ(got, plain.render(&b).pixels);
}

TEST(SimilarityFilter, ThresholdsOutsideZeroToOneAreRefusedNamingTheSetting) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.width = o.height = 16;
  Engine engine(o);
  FrameSettings s;
  for (float bad : {-0.5f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    s.skip_similar = bad;
    EXPECT_EQ(test::error_of([&] { engine.configure(s, true); }).rfind("skip-similar must be 0 (off) or in (0, 1], got ", 0),
              0u);
  }
}

// The default's numbers (similarity_filter.h) on random pictures: the measure through similarity_cpu and
// source_similarity at 512x512.
TEST(SimilarityFilter, AtTheDefaultAMovedPatchIsRenderedAndCodecNoiseSkipped) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int side = 512;
  const int64_t count = int64_t(side) * side * 3;
  const auto measure = [&](const std::vector<float>& x, const std::vector<float>& y) {
    SimilarityParams p;
    p.x = x.data(), p.y = y.data(), p.count = count, p.chunks = kSimilarityChunks;
    std::vector<float> sums = test::poisoned(size_t(p.chunks) * 3);
    p.sums = sums.data();
    similarity_cpu(p);
    return source_similarity(sums, count);
  };
  const std::vector<float> still = rng.vector(size_t(count));
  const auto patch = [&](int x0) {
    std::vector<float> v = still;
    for (int r = 200; r < 232; ++r)
      for (int c = x0; c < x0 + 32; ++c)
        for (int ch = 0; ch < 3; ++ch) v[(size_t(r) * side + c) * 3 + ch] = 1.0f;
    return v;
  };
  const int x0 = rng.integer(0, side - 40);
  EXPECT_LT(measure(patch(x0), patch(x0 + 1)), kDefaultSkipSimilar) << "a 32x32 patch moved one pixel";
  std::vector<float> a = still, b = still;
  for (size_t i = 0; i < a.size(); ++i) a[i] += kLevel * rng.normal(), b[i] += kLevel * rng.normal();
  EXPECT_GE(measure(a, b), kDefaultSkipSimilar) << "two frames of a still picture, one level of noise each";
  EXPECT_EQ(measure(still, still), 1.0);
}

}  // namespace
}  // namespace rtvd
