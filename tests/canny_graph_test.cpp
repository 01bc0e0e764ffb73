// The canny op in a graph (pipeline/graph/graph.h, canny_op) on each backend (the GPU one skips without a
// device): bound to arena tensors with its workspace, dispatched by the backend, a frame run twice with other
// thresholds written between (they change without a new plan; on the GPU the frame is a captured CUDA graph,
// replayed). Each output against canny_cpu run directly on the same image; the output tensor poisoned first.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/canny/canny.h"
#include "kernels/cast/rgb8_to_float.h"
#include "pipeline/device.h"
#include "pipeline/graph/graph.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr int kN = 2, kH = 45, kW = 67, kC = 3;

std::vector<float> canny_reference(const std::vector<float>& x, int low, int high) {
  const int32_t thresholds[2] = {low, high};
  std::vector<float> y(size_t(kN) * kH * kW * kCannyOutChannels);
  CannyParams p{.x = x.data(), .thresholds = thresholds, .y = y.data(), .n = kN, .h = kH, .w = kW, .c = kC};
  std::vector<uint8_t> ws(canny_workspace_bytes(p));
  p.workspace = ws.data();
  canny_cpu(p);
  return y;
}

class CannyGraphOn : public testing::TestWithParam<std::string> {};

TEST_P(CannyGraphOn, RunsAsCannyCpuWithThresholdsWrittenPerFrame) {
  std::string why;
  if (GetParam() == "cuda" && cuda_devices(&why).empty()) GTEST_SKIP() << why;
  std::string note;
  const DeviceKind device = device_kind_named(GetParam());
  const std::unique_ptr<Backend> backend =
      make_backend(device, 0, device == DeviceKind::Cuda ? KernelFamily::Custom : KernelFamily::Auto, &note);
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  // A random walk along each row, in bytes, as floats (rgb8_to_float's): edges of every strength.
  std::vector<uint8_t> bytes(size_t(kN) * kH * kW * kC);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const bool row_start = i % (size_t(kW) * kC) < kC;
    bytes[i] = uint8_t(row_start ? rng.integer(0, 255) : std::clamp(bytes[i - kC] + rng.integer(-40, 40), 0, 255));
  }
  std::vector<float> x(bytes.size());
  rgb8_to_float_cpu({.x = bytes.data(), .y = x.data(), .count = int64_t(bytes.size())});
  Graph g;
  const Ref image = g.add_tensor("image", Elem::F32, {kN, kH, kW, kC}, true);
  const Ref thresholds = g.add_tensor("canny_thresholds", Elem::I32, {2}, true);
  const Ref control = g.add_tensor("control_image", Elem::F32, {kN, kH, kW, kCannyOutChannels}, true);
  g.frame.push_back(Op{"controlnet.canny", canny_op(g, image, thresholds, control, kN, kH, kW, kC)});
  backend->prepare(g);
  backend->write(image, x.data(), x.size());
  const size_t out = size_t(kN) * kH * kW * kCannyOutChannels;
  for (const auto& [low, high] : {std::pair{60, 140}, std::pair{20, 300}}) {
    const std::vector<float> poison = test::poisoned(out);
    backend->write(control, poison.data(), out);
    const int32_t t[2] = {low, high};
    backend->write(thresholds, t, 2);
    backend->run_frame();
    std::vector<float> y(out);
    backend->read(control, y.data(), out);
    const std::vector<float> expected = canny_reference(x, low, high);
    const auto edges = std::count(expected.begin(), expected.end(), 1.0f);
    ASSERT_TRUE(edges > 0 && size_t(edges) < out) << "the image should have edges and flat parts";
    EXPECT_EQ(y, expected) << "low " << low << ", high " << high;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, CannyGraphOn, testing::Values("cpu", "cuda"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace rtvd
