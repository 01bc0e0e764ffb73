// The engine's asynchronous readback on each backend (the GPU case skips without a device): frames taken
// a step late arrive in order and equal the frames read synchronously.
#include <gtest/gtest.h>

#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "kernels/common/error.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

class EngineReadback : public testing::TestWithParam<std::string> {};

TEST_P(EngineReadback, QueuedImagesArriveInOrderAndEqualSynchronousReads) {
  std::string why;
  if (GetParam() == "cuda" && cuda_devices(&why).empty()) GTEST_SKIP() << why;
  EngineOptions o;
  o.device = device_kind_named(GetParam());
  if (o.device == DeviceKind::Cuda) o.kernels = KernelFamily::Custom;  // autotuned choices may differ between the two engines
  o.width = o.height = 32;
  FrameSettings s;
  s.seed = test::Rng().gen();
  s.steps = 1;
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

INSTANTIATE_TEST_SUITE_P(Devices, EngineReadback, testing::Values("cpu", "cuda"));

}  // namespace
}  // namespace rtvd
