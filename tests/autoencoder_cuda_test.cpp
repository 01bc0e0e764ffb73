// The SD autoencoders on the CUDA backend (fp16 storage, fp32 accumulation) against diffusers' fp32 outputs,
// with every kernel family: the tiny AutoencoderKL and the 16-channel AutoencoderTiny of tests/data, encode
// and decode (tests/support/autoencoder_reference.h): relative L2 <= 1e-2. Skips without a device.
#include <gtest/gtest.h>

#include <cstdio>

#include "pipeline/device.h"
#include "support/autoencoder_reference.h"
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr const char* kKernels[] = {"auto", "custom", "cudnn"};

class AutoencoderCuda : public testing::TestWithParam<const char*> {};

// Each error recorded as a test property and printed.
TEST_P(AutoencoderCuda, MatchesDiffusers) {
  RTVD_SKIP_WITHOUT_CUDA();
  const test::AutoencoderReference ref(GetParam());
  for (const char* kernels : kKernels) {
    std::string why;
    auto gpu = make_backend(DeviceKind::Cuda, 0, kernel_family_named(kernels), &why);
    // One frame (eager; with auto, the convs tuned on it) and four (auto's second frame tunes attention and
    // linears; from the third the frame replays as one CUDA graph).
    for (int frames : {1, 4}) {
      const test::AutoencoderOutputs out = test::run_autoencoder(*gpu, ref, ref.config, ref.weights(), frames);
      const double encode_err = test::rel_l2(out.latent, test::scaled(ref.mean, ref.config.latent()));
      const double decode_err = test::rel_l2(out.image, ref.decoded);
      const std::string key = cat(GetParam(), "_", kernels, "_frames", frames);
      testing::Test::RecordProperty(key + "_encode", cat(encode_err));
      testing::Test::RecordProperty(key + "_decode", cat(decode_err));
      std::printf("%s: encode rel_l2 %.3g, decode rel_l2 %.3g\n", key.c_str(), encode_err, decode_err);
      EXPECT_LE(encode_err, 1e-2) << key;
      EXPECT_LE(decode_err, 1e-2) << key;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, AutoencoderCuda, testing::Values("vae", "taesd"));

}  // namespace
}  // namespace rtvd
