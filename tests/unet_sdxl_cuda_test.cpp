// The scaled-down SDXL U-Net of tests/data/tiny_sdxl (tools/reference/export_tiny_sdxl.py) on the CUDA
// backend (fp16) against diffusers' fp32 outputs, every case, with every kernel family: relative L2 <= 1e-2,
// as the SD U-Nets' (unet_sd_cuda_test.cpp). Skips without a device.
#include <gtest/gtest.h>

#include "pipeline/device.h"
#include "pipeline/unet_runner.h"
#include "support/cuda_test_util.h"
#include "support/sdxl_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

TEST(UNetSdxlCuda, TinySdxlMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::DiffusersUNet u = test::load_diffusers_unet(test::test_data("tiny_sdxl/unet"));
  const auto cases = test::read_sdxl_reference(test::test_data("tiny_sdxl/unet_reference.safetensors"));
  ASSERT_GE(cases.size(), 2u);
  for (const char* kernels : {"custom", "cudnn"})
    for (const test::SdxlCase& c : cases) {
      std::string why;
      auto gpu = make_backend(DeviceKind::Cuda, 0, kernel_family_named(kernels), &why);
      UNetRunner run(u.config, *u.weights, *gpu, c.batch, c.height, c.width, c.t);
      u.weights->check_all_read();
      run.set_inputs(c.x, {}, c.context, c.text_embeds, c.time_ids);
      run.forward();
      EXPECT_LE(test::rel_l2(run.output(), c.v), 1e-2) << c.name << " " << kernels;
    }
}

}  // namespace
}  // namespace rtvd
