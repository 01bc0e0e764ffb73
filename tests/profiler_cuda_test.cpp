// The CUDA backend's profiler on the default model: every frame's GPU time, per-op times of sampled
// frames (each given once), the sampling interval kept to what a 2% overhead allows, and the per-op
// times adding up to about the frame.
#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/engine.h"
#include "support/cuda_test_util.h"

namespace rtvd {
namespace {

TEST(ProfilerCuda, SampledOpTimesAddUpToTheFrame) {
  RTVD_SKIP_WITHOUT_CUDA();
  EngineOptions o;
  o.device = DeviceKind::Cuda;
  o.kernels = KernelFamily::Custom;
  Engine engine(o);
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

}  // namespace
}  // namespace rtvd
