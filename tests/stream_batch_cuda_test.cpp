// Throughput mode on the GPU (skips without a device): each frame a stream batch gives out is the frame the
// same settings render one at a time, to fp16 rounding. The batch changes which kernels and tiles run (a
// batch of 8 is not a batch of 2), so the frames agree to a few RGBA8 steps where fp16's rounding through the
// U-Net lands on the other side, not bit for bit as on the CPU (stream_batch_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "support/controlnet_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

struct GpuStreamCase {
  std::string name, model;
  bool taesd = false;
  int size = 64, steps = 1, stream = 4;
  float guidance = 3.0f;
  std::optional<SamplerKind> sampler;
  bool img2img = true;
  bool canny_net = false;  // tests/data/tiny_controlnet's net1 on the Canny edges of each frame's source
};

void PrintTo(const GpuStreamCase& c, std::ostream* os) { *os << c.name; }

class StreamBatchCuda : public testing::TestWithParam<GpuStreamCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_devices(&why).empty()) GTEST_SKIP() << why;
  }
};

TEST_P(StreamBatchCuda, EveryFrameIsTheOneAtATimeFrame) {
  const GpuStreamCase& c = GetParam();
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  EngineOptions o;
  o.device = DeviceKind::Cuda;
  o.kernels = KernelFamily::Custom;  // autotuned choices may differ between engines
  o.width = o.height = c.size;
  if (!c.model.empty()) o.model.path = test::test_data(c.model);
  if (c.taesd) o.model.vae = VaeChoice{VaeChoice::Kind::Folder, test::test_data("tiny_taesd")};
  FrameSettings s;
  if (c.canny_net) {
    if (test::tiny_controlnet_dir().empty()) return;
    o.model.controlnets = {test::tiny_controlnet_dir() + "/net1"};
    s.controlnets = {{.scale = 0.8f, .preprocessor = ControlPreprocessor::Canny}};
  }
  s.seed = rng.gen();
  s.steps = c.steps;
  s.guidance = c.guidance;
  s.strength = 0.7f;
  s.sampler = c.sampler;
  Engine one(o), stream(o);
  const int channels = one.model().image_channels();
  const std::vector<float> picture = rng.vector(size_t(c.size) * c.size * channels, -1.0f, 1.0f);
  const auto source = [&](int f) {  // shifted by f pixels: every frame differs
    std::vector<float> image(picture.size());
    for (size_t p = 0; p < picture.size(); ++p) image[p] = picture[(p + size_t(f) * channels) % picture.size()];
    return image;
  };
  if (one.has_text_encoder()) {
    one.set_prompts({.prompt = "a lighthouse at dusk"});
    stream.set_prompts({.prompt = "a lighthouse at dusk"});
  }
  one.configure(s, c.img2img);
  s.stream_batch = c.stream;
  stream.configure(s, c.img2img);
  constexpr int kFrames = 10;
  std::vector<std::vector<uint8_t>> expected;
  std::vector<float> image;
  for (int f = 0; f < kFrames; ++f) expected.push_back(one.render(c.img2img ? &(image = source(f)) : nullptr).pixels);
  for (int n = 0; n < kFrames + c.stream - 1; ++n) {
    stream.step(c.img2img ? &(image = source(n)) : nullptr);
    const int f = n - (c.stream - 1);
    ASSERT_EQ(stream.has_output(), f >= 0);
    if (f < 0) continue;
    const std::vector<uint8_t>& got = stream.image().pixels;
    ASSERT_EQ(got.size(), expected[f].size());
    int most = 0;
    double sum = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const int d = std::abs(int(got[i]) - int(expected[f][i]));
      most = std::max(most, d), sum += d;
    }
    const double mean = sum / double(got.size());
    EXPECT_LE(mean, 0.25) << "frame " << f << ", largest difference " << most;
    EXPECT_LE(most, 24) << "frame " << f << ", mean difference " << mean;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, StreamBatchCuda,
    testing::Values(GpuStreamCase{.name = "default_img2img_1step", .stream = 4},
                    GpuStreamCase{.name = "default_txt2img_2steps", .steps = 2, .stream = 4, .img2img = false},
                    GpuStreamCase{.name = "sd_lcm_txt2img_4steps", .model = "tiny_sd", .steps = 4, .stream = 8,
                                  .guidance = 1.0f, .sampler = SamplerKind::Lcm, .img2img = false},
                    GpuStreamCase{.name = "sd_euler_img2img_guided", .model = "tiny_sd", .steps = 3, .stream = 2,
                                  .sampler = SamplerKind::Euler},
                    GpuStreamCase{.name = "sd_euler_a_txt2img_guided", .model = "tiny_sd", .steps = 3, .stream = 3,
                                  .sampler = SamplerKind::EulerAncestral, .img2img = false},
                    GpuStreamCase{.name = "sd_taesd_img2img_1step", .model = "tiny_sd", .taesd = true, .steps = 2,
                                  .stream = 4, .guidance = 1.0f},
                    // ControlNet: the net a branch beside the U-Net, each frame of the call with its own edges.
                    GpuStreamCase{.name = "sd_controlnet_img2img_1step", .model = "tiny_sd", .steps = 2, .stream = 4,
                                  .canny_net = true}),
    [](const testing::TestParamInfo<GpuStreamCase>& i) { return i.param.name; });

}  // namespace
}  // namespace rtvd
