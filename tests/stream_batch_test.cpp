// Throughput mode (FrameSettings::stream_batch, frame_plan.h) on the CPU backend: K frames in flight, the
// steps of successive frames batched into one call of the U-Net. Each frame that comes out equals the frame
// the same settings render one at a time (stream batch 1) from the same source, latency() steps after its
// source went in: the embedded pixel model (the fused last step and blend) and the tiny SD pipeline (text
// encoder, guidance, VAE or TAESD encode and decode; Euler, and LCM and Euler ancestral, whose steps add noise
// of their own; ControlNets, whose control images come with each frame of the group), over a source that moves
// every frame, with the blend history carried through. Fresh seeds and sources every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "pipeline/engine.h"
#include "support/controlnet_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

struct StreamCase {
  std::string name;
  std::string model;  // "" = the embedded default model; else a test data folder
  bool taesd = false;
  int size = 32;
  bool img2img = true;
  int steps = 1;
  float guidance = 3.0f;
  std::optional<SamplerKind> sampler;
  std::vector<int> streams;  // stream batches to compare with 1
  std::vector<ControlPreprocessor> nets;  // tests/data/tiny_controlnet's net1, net2, ... with these controls
  bool guess_mode = false;
};

void PrintTo(const StreamCase& c, std::ostream* os) { *os << c.name; }

EngineOptions options_of(const StreamCase& c) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.threads = 2;
  o.width = o.height = c.size;
  if (!c.model.empty()) o.model.path = test::test_data(c.model);
  if (c.taesd) o.model.vae = VaeChoice{VaeChoice::Kind::Folder, test::test_data("tiny_taesd")};
  for (size_t k = 0; k < c.nets.size(); ++k) o.model.controlnets.push_back(cat(test::tiny_controlnet_dir(), "/net", k + 1));
  return o;
}

// A source that moves: a random picture shifted by `frame` pixels, so that every frame differs.
std::vector<float> moving_source(const std::vector<float>& picture, int size, int channels, int frame) {
  std::vector<float> image(picture.size());
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      for (int c = 0; c < channels; ++c)
        image[(size_t(y) * size + x) * channels + c] = picture[(size_t(y) * size + (x + frame) % size) * channels + c];
  return image;
}

int max_byte_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int d = a.size() == b.size() ? 0 : 256;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(int(a[i]) - int(b[i])));
  return d;
}

class StreamBatch : public testing::TestWithParam<StreamCase> {};

TEST_P(StreamBatch, EveryFrameIsTheOneAtATimeFrame) {
  const StreamCase& c = GetParam();
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  FrameSettings s;
  s.seed = rng.gen();
  s.steps = c.steps;
  s.guidance = c.guidance;
  s.strength = 0.7f;
  s.blend = 0.4f;
  s.sampler = c.sampler;
  s.guess_mode = c.guess_mode;
  for (ControlPreprocessor p : c.nets) s.controlnets.push_back({.scale = 0.8f, .preprocessor = p});
  if (!c.nets.empty() && test::tiny_controlnet_dir().empty()) return;
  constexpr int kFrames = 7;
  Engine one(options_of(c));
  const int channels = one.model().image_channels();
  const std::vector<float> picture = rng.vector(size_t(c.size) * c.size * channels, -1.0f, 1.0f);
  const std::vector<float> control = rng.vector(size_t(c.size) * c.size * 3, -1.0f, 1.0f);
  std::vector<std::vector<float>> sources, controls;  // controls: for ControlPreprocessor::Image, moving the other way
  for (int f = 0; f < kFrames + 16; ++f) {
    sources.push_back(moving_source(picture, c.size, channels, f));
    controls.push_back(moving_source(control, c.size, 3, c.size - f % c.size));
  }
  const auto give_controls = [&](Engine& e, int f) {
    for (size_t k = 0; k < c.nets.size(); ++k)
      if (c.nets[k] == ControlPreprocessor::Image) e.set_control_image(k, controls[size_t(f)]);
  };
  const PromptSettings prompts{.prompt = "a red fox in the snow", .negative_prompt = c.guidance > 1 ? "blurry" : ""};
  if (one.has_text_encoder()) one.set_prompts(prompts);
  one.configure(s, c.img2img);
  std::vector<std::vector<uint8_t>> expected;
  for (int f = 0; f < kFrames; ++f) {
    give_controls(one, f);
    expected.push_back(one.render(c.img2img ? &sources[f] : nullptr).pixels);
  }
  for (int f = 1; f < kFrames; ++f) ASSERT_NE(expected[f], expected[f - 1]) << "the frames must differ: frame " << f;

  for (int k : c.streams) {
    SCOPED_TRACE(cat("stream batch ", k));
    Engine stream(options_of(c));
    if (stream.has_text_encoder()) stream.set_prompts(prompts);
    FrameSettings t = s;
    t.stream_batch = k;
    stream.configure(t, c.img2img);
    ASSERT_EQ(stream.latency(), k - 1);
    for (int n = 0; n < kFrames + k - 1; ++n) {
      give_controls(stream, n);
      stream.step(c.img2img ? &sources[n] : nullptr);
      const int f = n - (k - 1);  // the frame that came out
      ASSERT_EQ(stream.has_output(), f >= 0) << "step " << n;
      if (f < 0) {
        EXPECT_THROW(stream.image(), Error) << "no frame has come out at step " << n;
        continue;
      }
      EXPECT_LE(max_byte_diff(stream.image().pixels, expected[f]), 1) << "frame " << f;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, StreamBatch,
    testing::Values(StreamCase{.name = "default_img2img_1step", .streams = {2, 4}},
                    StreamCase{.name = "default_txt2img_2steps", .img2img = false, .steps = 2, .streams = {4}},
                    StreamCase{.name = "default_unguided_3steps", .steps = 3, .guidance = 1.0f, .streams = {6}},
                    StreamCase{.name = "sd_euler_img2img_2steps", .model = "tiny_sd", .steps = 3,
                               .sampler = SamplerKind::Euler, .streams = {4}},
                    StreamCase{.name = "sd_lcm_txt2img_4steps", .model = "tiny_sd", .img2img = false, .steps = 4,
                               .guidance = 1.0f, .sampler = SamplerKind::Lcm, .streams = {8}},
                    StreamCase{.name = "sd_euler_a_txt2img_3steps", .model = "tiny_sd", .img2img = false, .steps = 3,
                               .sampler = SamplerKind::EulerAncestral, .streams = {3}},
                    // --steps 4 at --strength 0.7: the last 2 steps run, the first adding noise.
                    StreamCase{.name = "sd_euler_a_img2img_2steps", .model = "tiny_sd", .steps = 4, .guidance = 1.0f,
                               .sampler = SamplerKind::EulerAncestral, .streams = {4}},
                    // --steps 2 at --strength 0.7: one step runs, as SD-Turbo's real-time img2img frame.
                    StreamCase{.name = "sd_taesd_img2img_1step", .model = "tiny_sd", .taesd = true, .steps = 2,
                               .guidance = 1.0f, .streams = {4}},
                    // ControlNets take a stream batch of 1-step frames: the Canny edges of each frame's source,
                    // guided; a control image of each frame's own and the source itself, in guess mode.
                    StreamCase{.name = "sd_controlnet_canny_1step", .model = "tiny_sd", .steps = 2, .streams = {2, 4},
                               .nets = {ControlPreprocessor::Canny}},
                    StreamCase{.name = "sd_controlnets_guess_1step", .model = "tiny_sd", .steps = 2, .streams = {3},
                               .nets = {ControlPreprocessor::Image, ControlPreprocessor::Source}, .guess_mode = true}),
    [](const testing::TestParamInfo<StreamCase>& i) { return i.param.name; });

// A re-plan keeps the blend history, as it does one frame at a time, though the calls of the new plan before
// its first frame comes out present nothing: at --blend 1 (the history alone) the frame after the re-plan is
// the frame before it, byte for byte.
TEST(StreamBatchSequence, AReplanKeepsTheBlendHistory) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const StreamCase c{.name = "default"};
  FrameSettings s;
  s.seed = rng.gen();
  s.steps = 2;
  s.blend = 1.0f;
  s.stream_batch = 4;
  Engine stream(options_of(c));
  const std::vector<float> picture = rng.vector(size_t(c.size) * c.size * 3, -1.0f, 1.0f);
  std::vector<float> image;
  stream.configure(s, true);
  int f = 0;
  for (; !stream.has_output(); ++f) stream.step(&(image = moving_source(picture, c.size, 3, f)));
  const std::vector<uint8_t> before = stream.image().pixels;
  s.strength = 0.9f;
  stream.configure(s, true);
  EXPECT_FALSE(stream.has_output()) << "the frames in flight of the old plan are dropped";
  for (; !stream.has_output(); ++f) stream.step(&(image = moving_source(picture, c.size, 3, f)));
  EXPECT_EQ(stream.image().pixels, before);
}

// restart() drops the frames in flight and the history: the frames after it are a fresh sequence's.
TEST(StreamBatchSequence, RestartStartsAFreshSequence) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const StreamCase c{.name = "default"};
  FrameSettings s;
  s.seed = rng.gen();
  s.steps = 1;
  s.blend = 0.5f;
  s.stream_batch = 2;
  Engine fresh(options_of(c)), restarted(options_of(c));
  const std::vector<float> picture = rng.vector(size_t(c.size) * c.size * 3, -1.0f, 1.0f);
  std::vector<float> image;
  fresh.configure(s, true);
  restarted.configure(s, true);
  for (int f = 0; f < 3; ++f) restarted.step(&(image = moving_source(picture, c.size, 3, 7 + f)));
  restarted.restart();
  for (int f = 0; f < 4; ++f) {
    image = moving_source(picture, c.size, 3, f);
    fresh.step(&image);
    restarted.step(&image);
    ASSERT_EQ(restarted.has_output(), f >= 1);
    if (f >= 1) EXPECT_EQ(restarted.image().pixels, fresh.image().pixels) << "frame " << f - 1;
  }
}

TEST(StreamBatchSettings, ABatchThatIsNoMultipleOfTheStepsIsRefusedNamingTheFlag) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.width = o.height = 16;
  Engine engine(o);
  FrameSettings s;
  s.steps = 2;
  s.stream_batch = 3;
  EXPECT_EQ(test::error_of([&] { engine.configure(s, false); }),
            "--stream-batch 3: expected a multiple of the 2 denoising steps that run (each U-Net call advances every "
            "frame in flight by one step)");
  s.stream_batch = kMaxStreamBatch + 2;
  EXPECT_EQ(test::error_of([&] { engine.configure(s, false); }),
            cat("--stream-batch ", kMaxStreamBatch + 2, ": expected 1 to ", kMaxStreamBatch, " frames in flight"));
  s.stream_batch = 2;
  s.skip_similar = 0.999f;
  EXPECT_EQ(test::error_of([&] { engine.configure(s, true); }),
            "--skip-similar with --stream-batch 2: the filter skips frames one at a time (a skipped frame would leave a "
            "hole in the batch): use --stream-batch 1");
  s.skip_similar = 0;
  s.stream_batch = 4;
  engine.configure(s, false);  // still configurable after the refusals
  EXPECT_EQ(engine.latency(), 3);
}

}  // namespace
}  // namespace rtvd
