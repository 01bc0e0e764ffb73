// The engine's readback on each backend (the GPU case skips without a device): frames taken a step late
// arrive in order and equal the frames read synchronously; a frame that is not finite is refused (with SDXL's
// own VAE on the GPU, naming it and the fix).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "app/common/startup_notes.h"
#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "base/error.h"
#include "support/sdxl_folder.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

// The default model at 32x32, one step, a fresh seed, on the device named by the parameter.
class EngineOnDevice : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (GetParam() == "cuda" && cuda_devices(&why).empty()) GTEST_SKIP() << why;
    o.device = device_kind_named(GetParam());
    if (o.device == DeviceKind::Cuda) o.kernels = KernelFamily::Custom;  // autotuned choices may differ between engines
    o.width = o.height = 32;
    s.seed = test::Rng().gen();
    s.steps = 1;
  }
  EngineOptions o;
  FrameSettings s;
};

class EngineReadback : public EngineOnDevice {};

// The steps bound (kMaxSteps, the one the CLI and the GUI use) is the engine's too, for every caller.
TEST(EngineSettings, StepsOutsideTheBoundAreRefusedNamingThem) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.width = o.height = 16;
  Engine engine(o);
  FrameSettings s;
  for (int bad : {0, -1, kMaxSteps + 1}) {
    s.steps = bad;
    EXPECT_EQ(test::error_of([&] { engine.configure(s, false); }),
              cat("steps must be in [1, ", kMaxSteps, "], got ", bad));
  }
  s.steps = kMaxSteps;
  engine.configure(s, false);
  EXPECT_EQ(engine.plan().stages.steps.size(), size_t(kMaxSteps));
}

// A new engine renders before it is configured: the default settings' txt2img frame, as an engine configured
// so renders it (the profiler's GPU tests rely on it; a pixel model's first plan was img2img's for a while,
// and such a render threw for want of a source image).
TEST_P(EngineReadback, RendersTheDefaultTxt2ImgFrameBeforeItIsConfigured) {
  Engine fresh(o), configured(o);
  configured.configure(FrameSettings{}, false);
  const ImageRgba8 expected = configured.render(nullptr);
  EXPECT_EQ(fresh.render(nullptr).pixels, expected.pixels);
}

TEST_P(EngineReadback, QueuedImagesArriveInOrderAndEqualSynchronousReads) {
  const int frames = 5;

  Engine sync_engine(o);
  sync_engine.configure(s, false);
  std::vector<ImageRgba8> expected;
  for (int i = 0; i < frames; ++i) expected.push_back(sync_engine.render(nullptr));
  ASSERT_NE(expected[0].pixels, expected[1].pixels) << "the noise walk should move between frames";

  Engine engine(o);
  engine.configure(s, false);
  EXPECT_THROW(engine.take_image(), Error);
  std::vector<ImageRgba8> taken;
  for (int i = 0; i < frames; ++i) {
    engine.step(nullptr);
    engine.queue_image();
    if (engine.queued_images() == 2) taken.push_back(engine.take_image());
  }
  while (engine.queued_images() > 0) taken.push_back(engine.take_image());
  ASSERT_EQ(taken.size(), size_t(frames));
  for (int i = 0; i < frames; ++i) EXPECT_EQ(taken[i].pixels, expected[i].pixels) << "frame " << i;

  engine.queue_image();
  engine.queue_image();
  EXPECT_THROW(engine.queue_image(), Error) << "a third pending readback";
}

class EngineSourceBytes : public EngineOnDevice {
 protected:
  // Fresh random 8-bit RGB frames of the engine's size.
  std::vector<std::vector<uint8_t>> random_frames(int count) {
    test::Rng rng;
    std::vector<std::vector<uint8_t>> frames(count, std::vector<uint8_t>(size_t(o.width) * o.height * 3));
    for (auto& f : frames)
      for (uint8_t& v : f) v = uint8_t(rng.integer(0, 255));
    return frames;
  }
};

// An 8-bit source image (sent as bytes, converted on the device) gives the frames its floats b / 127.5 - 1
// give (what a source's float path gives for the same picture at the frame's size), bit for bit, one frame
// at a time and in a stream batch (whose group gathers its bytes).
TEST_P(EngineSourceBytes, GiveTheFramesOfTheirFloats) {
  const std::vector<std::vector<uint8_t>> frames = random_frames(6);
  for (int stream_batch : {1, 2}) {
    SCOPED_TRACE(testing::Message() << "stream batch " << stream_batch);
    s.stream_batch = stream_batch;
    Engine from_floats(o), from_bytes(o);
    from_floats.configure(s, true);
    from_bytes.configure(s, true);
    for (size_t i = 0; i < frames.size(); ++i) {
      std::vector<float> floats(frames[i].size());
      for (size_t j = 0; j < floats.size(); ++j) floats[j] = float(frames[i][j]) / 127.5f - 1.0f;
      from_floats.step(&floats);
      from_bytes.step(frames[i]);
      ASSERT_EQ(from_bytes.has_output(), from_floats.has_output());
      if (from_floats.has_output()) EXPECT_EQ(from_bytes.image().pixels, from_floats.image().pixels) << "frame " << i;
    }
  }
}

// Frames stepped with the host ahead of the device (readbacks taken two frames late, as the render loop does)
// equal frames stepped one at a time, each waited for: every frame's inputs (its own source image, its noise)
// reach the device before its frame reads them and are not overwritten by the next frame's upload first (on
// the GPU the upload has a stream of its own and double-buffered staging: a missing wait shows as a wrong frame).
TEST_P(EngineSourceBytes, UploadsAheadOfTheDeviceGiveTheFramesOfWaitedOnes) {
  const std::vector<std::vector<uint8_t>> frames = random_frames(24);
  Engine waited(o), ahead(o);
  waited.configure(s, true);
  ahead.configure(s, true);
  std::vector<ImageRgba8> expected, taken;
  for (const auto& f : frames) expected.push_back(waited.render(f));
  for (const auto& f : frames) {
    ahead.step(f);
    ahead.queue_image();
    if (ahead.queued_images() == 2) taken.push_back(ahead.take_image());
  }
  while (ahead.queued_images() > 0) taken.push_back(ahead.take_image());
  ASSERT_EQ(taken.size(), expected.size());
  for (size_t i = 0; i < frames.size(); ++i) EXPECT_EQ(taken[i].pixels, expected[i].pixels) << "frame " << i;
  EXPECT_NE(expected[0].pixels, expected[1].pixels) << "each frame has its own source";
}

// Frames decoded into the engine's own source buffer (source_frame(), sent from where it is) equal frames
// stepped from vectors of the caller's, with the buffer rewritten for the next frame as soon as step() returns
// and the readbacks taken two frames late, as the render loop does: each frame reads its own bytes (on the GPU
// the copy runs from the buffer itself, and a step that returned before the copy read it shows as a wrong
// frame). A stream batch gathers the buffer's frames as any others. The buffer stays where it is.
TEST_P(EngineSourceBytes, FromTheSourceFrameGiveTheFramesOfTheCallersVectors) {
  const std::vector<std::vector<uint8_t>> frames = random_frames(12);
  for (int stream_batch : {1, 2}) {
    SCOPED_TRACE(testing::Message() << "stream batch " << stream_batch);
    s.stream_batch = stream_batch;
    Engine waited(o), in_place(o);
    waited.configure(s, true);
    in_place.configure(s, true);
    std::vector<ImageRgba8> expected, taken;
    for (const auto& f : frames) {
      waited.step(f);
      if (waited.has_output()) expected.push_back(waited.image());
    }
    std::vector<uint8_t>& buffer = in_place.source_frame();
    const uint8_t* where = buffer.data();
    ASSERT_GE(buffer.capacity(), frames[0].size());
    for (const auto& f : frames) {
      buffer = f;  // as a source's next() fills it
      in_place.step(buffer);
      std::fill(buffer.begin(), buffer.end(), uint8_t(0xA5));  // the caller's next write, at once
      if (!in_place.has_output()) continue;
      in_place.queue_image();
      if (in_place.queued_images() == 2) taken.push_back(in_place.take_image());
    }
    while (in_place.queued_images() > 0) taken.push_back(in_place.take_image());
    EXPECT_EQ(in_place.source_frame().data(), where);
    ASSERT_EQ(taken.size(), expected.size());
    ASSERT_GE(taken.size(), size_t(10));
    for (size_t i = 0; i < taken.size(); ++i) EXPECT_EQ(taken[i].pixels, expected[i].pixels) << "frame " << i;
  }
}

class EngineNonFinite : public EngineOnDevice {};

// A frame that is not finite (here: NaN written into the blend history, as a model output of NaN would leave
// it) is refused where it reaches the host, read late or at once, with one line naming it and the likely
// causes; the frames before it arrive as they were; the frames queued after it are dropped and the next
// frame starts over without the history. The flag is the frame's own: a good frame after a bad one, in the
// same CUDA graph, is not flagged.
TEST_P(EngineNonFinite, AFrameThatIsNotFiniteIsRefusedAndTheNextStartsOver) {
  const std::string causes = GetParam() == "cuda" ? "values too large for fp16" : "values too large for fp32";
  const std::string message = " is not finite (NaN or Inf in the model's output): lower --guidance or a --lora "
                              "scale, or the checkpoint holds " + causes;
  const size_t count = 32 * 32 * 3;
  const std::vector<float> nan(count, std::numeric_limits<float>::quiet_NaN());

  // Read a frame late, as rtvd render and the GUI's recording do.
  Engine engine(o);
  engine.configure(s, false);
  std::vector<ImageRgba8> taken;
  for (int i = 0; i < 3; ++i) {
    engine.step(nullptr);
    engine.queue_image();
    if (engine.queued_images() == 2) taken.push_back(engine.take_image());
  }
  engine.backend().write(engine.plan().prev, nan.data(), count);  // frame 3 blends with it
  engine.step(nullptr);
  engine.queue_image();
  taken.push_back(engine.take_image());  // frame 2: good
  engine.step(nullptr);                   // frame 4, queued after the bad one
  engine.queue_image();
  EXPECT_EQ(test::error_of([&] { engine.take_image(); }), "frame 3" + message);
  EXPECT_EQ(engine.queued_images(), 0) << "frame 4, made from frame 3's history, is dropped";
  ASSERT_EQ(taken.size(), 3u);
  for (const ImageRgba8& image : taken) {
    const auto [lo, hi] = std::minmax_element(image.pixels.begin(), image.pixels.end());
    EXPECT_GT(*hi - *lo, 40) << "the frames before it as they were, not black";
  }
  for (int i = 0; i < 4; ++i) {  // frames 5..8 without the history: eager, then a new CUDA graph
    engine.step(nullptr);
    engine.queue_image(i % 2 == 0);  // with the pixels, or the flag alone (the GUI's display)
    EXPECT_NO_THROW(engine.take_image()) << "frame " << engine.frame_index() - 1;
  }

  // Read at once (the GUI's host upload, screenshots). Frame 3 is not read: frame 4, its history made good
  // again, replays the same graph and must not carry frame 3's flag.
  Engine sync(o);
  sync.configure(s, false);
  for (int i = 0; i < 3; ++i) sync.render(nullptr);
  std::vector<float> history(count);
  sync.backend().read(sync.plan().prev, history.data(), count);
  sync.backend().write(sync.plan().prev, nan.data(), count);
  sync.step(nullptr);
  sync.backend().write(sync.plan().prev, history.data(), count);
  EXPECT_NO_THROW(sync.render(nullptr)) << "frame 4";
  sync.backend().write(sync.plan().prev, nan.data(), count);
  sync.step(nullptr);
  EXPECT_EQ(test::error_of([&] { sync.image(); }), "frame 5" + message);
  EXPECT_EQ(test::error_of([&] { sync.image(); }), "frame 5" + message) << "asked again";
  EXPECT_NO_THROW(sync.render(nullptr)) << "frame 6 starts over";
}

// An SDXL model decoding with its own VAE (force_upcast in its config, which diffusers honours by decoding in
// fp32): on the GPU, whose activations are fp16, its frame that is not finite names that VAE and the fixes, and the
// start-up note says the same before the first frame; on the CPU (fp32) neither.
TEST_P(EngineNonFinite, SdxlsOwnVaeOnTheGpuIsNamedWithTheFix) {
  test::TempDir tmp{"rtvd_engine_sdxl"};
  test::write_random_sdxl_folder(tmp.path("sdxl"));
  o.model.path = tmp.path("sdxl");
  o.width = 64;
  o.height = 48;
  const bool gpu = GetParam() == "cuda";
  Engine engine(o);
  EXPECT_EQ(engine.on_gpu(), gpu);
  EXPECT_EQ(vae_precision_note(engine.model(), engine.on_gpu()), gpu ? "note: " + fp16_vae_advice() : "");
  engine.configure(s, false);
  engine.render(nullptr);
  const size_t count = 64 * 48 * 3;
  const std::vector<float> nan(count, std::numeric_limits<float>::quiet_NaN());
  engine.backend().write(engine.plan().prev, nan.data(), count);  // frame 1 blends with it
  engine.step(nullptr);
  const std::string causes = gpu ? fp16_vae_advice()
                                 : "lower --guidance or a --lora scale, or the checkpoint holds values too large for fp32";
  EXPECT_EQ(test::error_of([&] { engine.image(); }),
            "frame 1 is not finite (NaN or Inf in the model's output): " + causes);
}

INSTANTIATE_TEST_SUITE_P(Devices, EngineReadback, testing::Values("cpu", "cuda"));
INSTANTIATE_TEST_SUITE_P(Devices, EngineNonFinite, testing::Values("cpu", "cuda"));
INSTANTIATE_TEST_SUITE_P(Devices, EngineSourceBytes, testing::Values("cpu", "cuda"));

}  // namespace
}  // namespace rtvd
