// The CUDA backend's profiler on the default model: every frame's GPU time, per-op times of sampled
// frames (each given once), the sampling interval kept to what a 2% overhead allows, and the per-op
// times adding up to about the frame; ranges of ops replayed alone.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "pipeline/engine.h"
#include "support/cuda_test_util.h"

namespace rtvd {
namespace {

// The default model on the GPU with our kernels (nothing tuned: every frame the same).
EngineOptions default_model_on_cuda() {
  EngineOptions o;
  o.device = DeviceKind::Cuda;
  o.kernels = KernelFamily::Custom;
  return o;
}

TEST(ProfilerCuda, SampledOpTimesAddUpToTheFrame) {
  RTVD_SKIP_WITHOUT_CUDA();
  Engine engine(default_model_on_cuda());
  engine.backend().set_profiling(true);
  const size_t ops = engine.plan().graph.frame.size();
  int samples = 0;
  double op_sum = 0, frame_ms = 0;
  for (int i = 0; i < 300; ++i) {
    engine.render(nullptr);  // reads the frame back: it has completed
    const std::vector<float> ms = engine.backend().frame_op_ms();
    if (ms.empty()) continue;
    ASSERT_EQ(ms.size(), ops);
    double sum = 0;
    for (float m : ms) {
      ASSERT_TRUE(std::isfinite(m) && m >= 0.0f) << m;
      sum += m;
    }
    ++samples;
    op_sum += sum;
    frame_ms = engine.backend().frame_gpu_ms();
    ASSERT_GT(frame_ms, 0.0);
  }
  // The first graph frame is sampled, then at most one in two frames and at least one in a thousand.
  EXPECT_GE(samples, 1);
  EXPECT_LE(samples, 151);
  const double mean_ops = op_sum / samples;
  // An op-timed frame is slower than a plain one by what its events cost; its ops add up to it.
  EXPECT_GT(mean_ops, 0.5 * frame_ms) << "ops " << mean_ops << " ms, frame " << frame_ms << " ms";
  EXPECT_LT(mean_ops, 4.0 * frame_ms) << "ops " << mean_ops << " ms, frame " << frame_ms << " ms";
  engine.backend().set_profiling(false);
  engine.render(nullptr);
  EXPECT_TRUE(engine.backend().frame_op_ms().empty());
  EXPECT_EQ(engine.backend().frame_gpu_ms(), 0.0f);
}

// Ranges of the frame's ops replayed alone: the halves add up to about the whole frame replayed alone, which
// is about the frame's GPU time; a range outside the frame, or asked before a frame ran since the plan or
// profiling changed, is refused.
TEST(ProfilerCuda, OpRangesReplayedAloneAddUpToTheFrame) {
  RTVD_SKIP_WITHOUT_CUDA();
  Engine engine(default_model_on_cuda());
  const size_t ops = engine.plan().graph.frame.size();
  EXPECT_THROW(engine.backend().time_op_ranges({{0, ops}}, 5), Error) << "before the frame was captured";
  engine.backend().set_profiling(true);
  double frame_ms = 0;
  for (int i = 0; i < 20; ++i) {
    engine.render(nullptr);
    frame_ms = engine.backend().frame_gpu_ms();
  }
  const std::vector<double> ms = engine.backend().time_op_ranges({{0, ops}, {0, ops / 2}, {ops / 2, ops}}, 30);
  ASSERT_EQ(ms.size(), 3u);
  for (double m : ms) EXPECT_GT(m, 0.0);
  EXPECT_NEAR(ms[1] + ms[2], ms[0], 0.25 * ms[0]) << "halves " << ms[1] << " + " << ms[2] << " ms";
  EXPECT_NEAR(ms[0], frame_ms, 0.5 * frame_ms) << "the frame's own GPU time";
  EXPECT_THROW(engine.backend().time_op_ranges({{ops / 2, ops + 1}}, 5), Error);
  EXPECT_THROW(engine.backend().time_op_ranges({{3, 3}}, 5), Error);
  engine.render(nullptr);  // the frame's own graph still runs
  EXPECT_GT(engine.backend().frame_gpu_ms(), 0.0f);
  engine.backend().set_profiling(false);  // its graphs go: the next frame runs eagerly first
  EXPECT_THROW(engine.backend().time_op_ranges({{0, ops}}, 5), Error) << "after profiling changed";
}

}  // namespace
}  // namespace rtvd
