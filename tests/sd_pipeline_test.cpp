// The whole latent frame on the CPU (fp32) against diffusers' StableDiffusionPipeline and
// StableDiffusionImg2ImgPipeline, on the scaled-down pipeline of tests/data/tiny_sd (and the 16-channel TAESD
// of tests/data/tiny_taesd), as tools/reference/export_sd_references.py ran them: tokenizer, text encoder,
// sampler (Euler, DDIM, LCM), U-Net with and without guidance, the autoencoder's encode (img2img) and decode,
// with the same prompt, initial latents or source image and noise, and the noise LCM adds
// (support/sd_pipeline_reference.h). Both sides compute in fp32: the final latents and the decoded image at
// relative L2 <= 1e-4.
#include <gtest/gtest.h>

#include "support/sd_pipeline_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

test::PipelineReference tiny_reference() {
  return test::read_pipeline_reference(test::test_data("sd_refs"), test::test_data("tiny_sd"), test::test_data("tiny_taesd"));
}

class SdPipeline : public testing::TestWithParam<int> {};

TEST_P(SdPipeline, MatchesDiffusers) {
  const test::PipelineReference ref = tiny_reference();
  const std::string name = ref.cases.at(GetParam())["name"];
  const test::PipelineErrors e = test::run_pipeline_case(ref, GetParam(), DeviceKind::Cpu, KernelFamily::Auto, 1);
  RecordProperty("latents_rel_l2", cat(e.latents));
  std::printf("%s: latents rel_l2 %.3g, image rel_l2 %s\n", name.c_str(), e.latents,
              e.has_image ? cat(e.image).c_str() : "(not in the reference)");
  EXPECT_LE(e.latents, 1e-4);
  if (e.has_image) EXPECT_LE(e.image, 1e-4);  // the 256^2 TAESD image is left out of the committed file
}

INSTANTIATE_TEST_SUITE_P(Cases, SdPipeline, testing::Range(0, 8), [](const testing::TestParamInfo<int>& i) {
  return tiny_reference().cases.at(i.param)["name"].get<std::string>();
});

}  // namespace
}  // namespace rtvd
