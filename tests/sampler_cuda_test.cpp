// The SD samplers' frames on the CUDA backend (fp16) against the CPU backend (fp32), on the tiny SD pipeline
// (skips without a device). Both take the same noise walk for the start and for the fresh noise of the steps
// that add it (LCM's, Euler ancestral's: the host writes it), so their final latents differ by the U-Net's fp16
// error alone, within the bound sd_pipeline_cuda_test allows against diffusers. A backend that dropped Euler
// ancestral's noise would give Euler's frame, and its case checks that this is many times the bound away, so
// that the comparison can tell.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr double kTolerance = 2e-2;  // relative L2 of the final latents, as sd_pipeline_cuda_test's
constexpr int kFrames = 2;           // the second takes other noise from each walk

struct Inputs {
  uint64_t seed = 0;
  bool img2img = false;
  std::vector<float> source;  // img2img's image
};

// The final latents of each frame (the sample after the last step) of a 3-step, guided frame at 64x64.
std::vector<std::vector<float>> latents(DeviceKind device, SamplerKind sampler, const Inputs& r) {
  EngineOptions o;
  o.device = device;
  if (device == DeviceKind::Cuda) o.kernels = KernelFamily::Custom;
  o.width = o.height = 64;
  o.model.path = test::test_data("tiny_sd");
  Engine engine(o);
  engine.set_prompts({.prompt = "a lighthouse at dusk", .negative_prompt = "blurry"});
  FrameSettings s;
  s.seed = r.seed;
  s.steps = r.img2img ? 4 : 3;  // img2img at 0.75 runs the last 3
  s.strength = 0.75f;
  s.guidance = 3.0f;
  s.blend = 0.0f;
  s.sampler = sampler;
  engine.configure(s, r.img2img);
  const FramePlan& plan = engine.plan();
  const size_t count = size_t(plan.latent_width) * plan.latent_height * engine.model().config.in_channels;
  std::vector<std::vector<float>> out;
  for (int f = 0; f < kFrames; ++f) {
    engine.step(r.img2img ? &r.source : nullptr);
    out.emplace_back(count);
    engine.backend().read(plan.sample, out.back().data(), count);
  }
  return out;
}

class SamplerCuda : public testing::TestWithParam<SamplerKind> {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_devices(&why).empty()) GTEST_SKIP() << why;
  }
};

TEST_P(SamplerCuda, FramesMatchTheCpuBackend) {
  const SamplerKind sampler = GetParam();
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (const bool img2img : {false, true}) {
    SCOPED_TRACE(img2img ? "img2img" : "txt2img");
    const Inputs r{rng.gen(), img2img, rng.vector(64 * 64 * 3, -1.0f, 1.0f)};
    const auto gpu = latents(DeviceKind::Cuda, sampler, r), cpu = latents(DeviceKind::Cpu, sampler, r);
    const bool ancestral = sampler == SamplerKind::EulerAncestral;
    const auto cpu_euler = ancestral ? latents(DeviceKind::Cpu, SamplerKind::Euler, r) : cpu;
    for (int f = 0; f < kFrames; ++f) {
      SCOPED_TRACE(cat("frame ", f));
      ASSERT_TRUE(test::all_finite(gpu[f]));
      const double error = test::rel_l2(gpu[f], cpu[f]);
      EXPECT_LE(error, kTolerance);
      if (ancestral) EXPECT_GE(test::rel_l2(cpu_euler[f], cpu[f]), 5 * kTolerance) << "the steps' noise must show";
      RecordProperty(cat(sampler_name(sampler), img2img ? "_img2img" : "_txt2img", "_frame", f), cat(error));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Samplers, SamplerCuda,
                         testing::Values(SamplerKind::Euler, SamplerKind::EulerAncestral, SamplerKind::Lcm,
                                         SamplerKind::Ddim),
                         [](const testing::TestParamInfo<SamplerKind>& i) { return std::string(sampler_name(i.param)); });

}  // namespace
}  // namespace rtvd
