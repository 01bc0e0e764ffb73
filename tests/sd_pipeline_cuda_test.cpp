// The whole latent frame on the CUDA backend (fp16, one CUDA graph once tuned) against diffusers' pipelines
// in fp32 (support/sd_pipeline_reference.h), with every kernel family: the scaled-down cases of
// tests/data/sd_refs always, and full-size cases at 512x512 on the GPU machine (SD-Turbo's or SD 1.5's
// architecture) from the files tools/reference/export_sd_references.py --full writes there (never committed):
//
//   RTVD_SD_PARITY_DIR=/tmp/rtvd-sd [RTVD_SD_PARITY_MODEL=/tmp/rtvd-sd/model.safetensors] tests/sd_pipeline_cuda_test
//
// (SDXL's: RTVD_SDXL_PARITY_DIR; ControlNet's: RTVD_CONTROLNET_PARITY_DIR and RTVD_SDXL_CONTROLNET_PARITY_DIR, below)
//
// with <dir>/pipelines.json, pipelines.safetensors, model/ (the diffusers folder the cases ran; or the model
// RTVD_SD_PARITY_MODEL names instead, such as diffusers' conversion of it to one file) and taesd/ (every case
// with `auto`, the first with each family). Tolerances: the
// final latents and images at relative L2 <= 2e-2 (the bound for whole images on the GPU). Without the
// variable or a device those tests skip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "support/controlnet_reference.h"
#include "support/cuda_test_util.h"
#include "support/sd_pipeline_reference.h"
#include "support/sdxl_folder.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr KernelFamily kFamilies[] = {KernelFamily::Auto, KernelFamily::Custom, KernelFamily::Cudnn};

// Every case with every kernel family; `all_families_first_only`: the other families on the first case alone
// (full size: each run loads 2 GB and tunes its layers).
void check_all(const test::PipelineReference& ref, const std::string& what, bool all_families_first_only) {
  for (size_t i = 0; i < ref.cases.size(); ++i)
    for (KernelFamily k : kFamilies) {
      if (all_families_first_only && i > 0 && k != KernelFamily::Auto) continue;
      const std::string key = cat(what, "_", ref.cases[i]["name"].get<std::string>(), "_", kernel_family_name(k));
      const test::PipelineErrors e = test::run_pipeline_case(ref, i, DeviceKind::Cuda, k, 4);
      testing::Test::RecordProperty(key, cat(e.latents, " ", e.image));
      std::printf("sd pipeline %s: latents rel_l2 %.3g, image rel_l2 %s\n", key.c_str(), e.latents,
                  e.has_image ? cat(e.image).c_str() : "-");
      EXPECT_LE(e.latents, 2e-2) << key;
      if (e.has_image) EXPECT_LE(e.image, 2e-2) << key;
    }
}

TEST(SdPipelineCuda, ScaledDownMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_all(test::read_pipeline_reference(test::test_data("sd_refs"), test::test_data("tiny_sd"),
                                          test::test_data("tiny_taesd")),
            "tiny", false);
}

// SDXL's scaled-down cases (tests/data/tiny_sdxl_pipeline: both text encoders, the added conditioning, Euler
// ancestral), as tests/sdxl_pipeline_test.cpp runs them on the CPU.
TEST(SdPipelineCuda, ScaledDownSdxlMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const std::string dir = test::tiny_sdxl_pipeline_dir();
  if (dir.empty()) return;
  test::PipelineReference ref = test::read_pipeline_reference(dir, dir + "/model", "");
  ref.step_noise = ".step_noise_";
  check_all(ref, "tiny_sdxl", false);
}

// tests/data/tiny_controlnet's ControlNet pipelines (one net and two, start/end, guess mode, img2img), as
// tests/controlnet_pipeline_test.cpp runs them on the CPU.
TEST(SdPipelineCuda, ScaledDownControlNetMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  test::PipelineReference ref = test::read_pipeline_reference(dir, test::test_data("tiny_sd"), "");
  ref.controlnet_dir = dir;
  check_all(ref, "tiny_controlnet", false);
}

TEST(SdPipelineCuda, FullSizeAt512MatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const char* dir = std::getenv("RTVD_SD_PARITY_DIR");
  if (!dir) GTEST_SKIP() << "RTVD_SD_PARITY_DIR is not set (tools/reference/export_sd_references.py --full writes it)";
  if (!std::filesystem::exists(std::string(dir) + "/pipelines.json")) GTEST_SKIP() << "no " << dir << "/pipelines.json";
  const char* model = std::getenv("RTVD_SD_PARITY_MODEL");
  check_all(test::read_pipeline_reference(dir, model ? model : std::string(dir) + "/model", std::string(dir) + "/taesd"),
            model ? "full_size_model" : "full_size", true);
}

// SD 1.5 with two ControlNets at full size, random weights, at 512x512 (the cases of tests/data/tiny_controlnet:
// one net and two, scales, start/end, guess mode, img2img): RTVD_CONTROLNET_PARITY_DIR holds model/ (an SD folder:
// export_sd_references.py --full --arch sd15 --weights-only) and what export_tiny_controlnet.py DIR/model DIR
// --full writes beside it (net1/, net2/, pipelines.*), on the GPU machine (never committed: ~3 GB).
TEST(SdPipelineCuda, FullSizeControlNetMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const char* dir = std::getenv("RTVD_CONTROLNET_PARITY_DIR");
  if (!dir) GTEST_SKIP() << "RTVD_CONTROLNET_PARITY_DIR is not set (tools/reference/export_tiny_controlnet.py --full)";
  if (!std::filesystem::exists(std::string(dir) + "/pipelines.json")) GTEST_SKIP() << "no " << dir << "/pipelines.json";
  test::PipelineReference ref = test::read_pipeline_reference(dir, std::string(dir) + "/model", "");
  ref.controlnet_dir = dir;
  check_all(ref, "full_size_controlnet", true);
}

// SDXL at full size, random weights, at 512x512 and 1024x1024 (the 1024x1024 frame's VAE decode runs the
// mid-block attention over 16,384 tokens): tools/reference/export_tiny_sdxl_pipeline.py --full writes
// RTVD_SDXL_PARITY_DIR on the GPU machine (never committed: ~7 GB). With RTVD_SDXL_PARITY_MODEL, the same cases
// from that folder as one original-layout file (export_tiny_sdxl_single_file.py --full), its configs read off the
// tensors' shapes.
TEST(SdPipelineCuda, FullSizeSdxlMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const char* dir = std::getenv("RTVD_SDXL_PARITY_DIR");
  if (!dir) GTEST_SKIP() << "RTVD_SDXL_PARITY_DIR is not set (tools/reference/export_tiny_sdxl_pipeline.py --full)";
  if (!std::filesystem::exists(std::string(dir) + "/pipelines.json")) GTEST_SKIP() << "no " << dir << "/pipelines.json";
  const char* model = std::getenv("RTVD_SDXL_PARITY_MODEL");
  test::PipelineReference ref = test::read_pipeline_reference(dir, model ? model : std::string(dir) + "/model", "");
  ref.step_noise = ".step_noise_";
  check_all(ref, model ? "full_size_sdxl_single_file" : "full_size_sdxl", true);
}

// SDXL at full size with a full-size ControlNet of its U-Net, random weights, at 1024x1024 (issue 29):
// tools/reference/export_sdxl_controlnet.py writes RTVD_SDXL_CONTROLNET_PARITY_DIR (model/, net1/, pipelines.*) on the
// GPU machine (never committed: ~7 GB).
TEST(SdPipelineCuda, FullSizeSdxlControlNetMatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const char* dir = std::getenv("RTVD_SDXL_CONTROLNET_PARITY_DIR");
  if (!dir) GTEST_SKIP() << "RTVD_SDXL_CONTROLNET_PARITY_DIR is not set (tools/reference/export_sdxl_controlnet.py)";
  if (!std::filesystem::exists(std::string(dir) + "/pipelines.json")) GTEST_SKIP() << "no " << dir << "/pipelines.json";
  test::PipelineReference ref = test::read_pipeline_reference(dir, std::string(dir) + "/model", "");
  ref.controlnet_dir = dir;
  ref.step_noise = ".step_noise_";
  check_all(ref, "full_size_sdxl_controlnet", true);
}

}  // namespace
}  // namespace rtvd
