// tests/data/tiny_controlnet (tools/reference/export_tiny_controlnet.py) on the CUDA backend (fp16), with each
// kernel family, against diffusers' fp32 outputs: each net's residuals, both nets' summed, and the U-Net's
// output given either, relative L2 <= 1e-2. Skips without a device.
#include <gtest/gtest.h>

#include "pipeline/device.h"
#include "support/controlnet_reference.h"
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

TEST(TinyControlNetCuda, MatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  float scales[2];
  const auto cases = test::read_controlnet_cases(dir, scales);
  ASSERT_GE(cases.size(), 2u);
  for (const char* kernels : {"custom", "cudnn"}) {
    std::string why;
    auto gpu = make_backend(DeviceKind::Cuda, 0, kernel_family_named(kernels), &why);
    ASSERT_TRUE(gpu) << why;
    for (const test::ControlNetCase& c : cases) {
      SCOPED_TRACE(cat(kernels, " kernels, ", c.name, ": batch ", c.batch, ", ", c.height, "x", c.width));
      test::expect_near(test::run_controlnets(*gpu, dir, c, scales), c.expected, 1e-2);
    }
  }
}

}  // namespace
}  // namespace rtvd
