// The CLIP text encoder on the CUDA backend (fp16) against transformers (fp32), with every kernel family and
// clip skip 0, 1 and 2: the scaled-down encoders of tests/data/clip_text (always), and the production ones on
// the GPU machine, from files that tools/reference/export_clip_text.py writes there (never committed):
//
//   RTVD_CLIP_PARITY_DIR=/tmp/rtvd-clip tests/text_encoder_cuda_test
//
// with <dir>/sd15 (OpenAI CLIP ViT-L/14) and <dir>/sd21 (OpenCLIP ViT-H/14) each holding text_encoder/ and
// expected.safetensors. Without the variable or a device those tests skip.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "pipeline/device.h"
#include "pipeline/text_encoder.h"
#include "support/clip_text_expected.h"
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr const char* kKernels[] = {"auto", "custom", "cudnn"};

// rel L2 <= 1e-2 for every kernel family and clip skip; each error recorded as a test property and printed.
void check(const std::string& name, const std::string& dir) {
  const test::ClipTextExpected e = test::read_clip_text_expected(dir + "/expected.safetensors");
  for (const char* kernels : kKernels) {
    std::string why;
    auto gpu = make_backend(DeviceKind::Cuda, 0, kernel_family_named(kernels), &why);
    for (int skip : {0, 1, 2}) {
      TextEncoder encoder(dir + "/text_encoder", *gpu, skip);
      const double err = test::rel_l2(encoder.encode(e.ids, e.batch), e.hidden[skip]);
      const std::string key = cat(name, "_", kernels, "_skip", skip);
      testing::Test::RecordProperty(key, cat(err));
      std::printf("text encoder %s: rel_l2 %.3g\n", key.c_str(), err);
      EXPECT_LE(err, 1e-2) << key;
    }
  }
}

TEST(TextEncoderCuda, ScaledDownMatchTransformers) {
  RTVD_SKIP_WITHOUT_CUDA();
  for (const char* name : {"small_quick_gelu", "small_gelu"}) check(name, test::test_data(std::string("clip_text/") + name));
}

void check_full_size(const std::string& name) {
  const char* root = std::getenv("RTVD_CLIP_PARITY_DIR");
  if (!root) GTEST_SKIP() << "RTVD_CLIP_PARITY_DIR is not set (tools/reference/export_clip_text.py writes the files)";
  const std::string dir = std::string(root) + "/" + name;
  if (!std::filesystem::exists(dir + "/expected.safetensors")) GTEST_SKIP() << "no " << dir << "/expected.safetensors";
  check(name, dir);
}

TEST(TextEncoderCuda, Sd15FullSizeMatchesTransformers) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_full_size("sd15");
}

TEST(TextEncoderCuda, Sd21FullSizeMatchesTransformers) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_full_size("sd21");
}

}  // namespace
}  // namespace rtvd
