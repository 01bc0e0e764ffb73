// SDXL's text encoders and prompt embeddings on the CUDA backend (fp16) against diffusers'
// StableDiffusionXLPipeline.encode_prompt (fp32) on tests/data/tiny_sdxl (tools/reference/export_tiny_sdxl_text.py),
// every case, with every kernel family: relative L2 <= 1e-2, as the text encoder's (text_encoder_cuda_test.cpp).
// Skips without a device; fails, naming the script, where the data is missing.
#include <gtest/gtest.h>

#include "pipeline/device.h"
#include "support/cuda_test_util.h"
#include "support/sdxl_text_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

TEST(SdxlTextCuda, TinySdxlMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const std::string dir = test::tiny_sdxl_text_dir();
  if (dir.empty()) return;  // the failure names what is missing
  for (const char* kernels : {"auto", "custom", "cudnn"}) {
    const auto make = [&] {
      std::string why;
      return make_backend(DeviceKind::Cuda, 0, kernel_family_named(kernels), &why);
    };
    const double worst = test::check_sdxl_text_cases(dir, make, 1e-2, kernels);
    testing::Test::RecordProperty(std::string("sdxl_text_") + kernels, cat(worst));
  }
}

}  // namespace
}  // namespace rtvd
