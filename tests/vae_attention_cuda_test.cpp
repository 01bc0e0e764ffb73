// The VAE's mid-block attention at 1024²'s size through the whole CUDA backend: an AutoencoderKL decoder of
// one level of 512 channels (a latent per pixel) on a 128x128 latent is conv_in, the mid block (ResNet, the
// one-head attention of dim 512 over 16,384 tokens, ResNet) and conv_out, the attention exactly the SD VAE's at
// 1024². The backend plans it (its workspace from the candidates, the GEMM path's chunks), runs it eagerly,
// tunes it and replays it as a CUDA graph; every run against the CPU backend on the same random weights:
// rel L2 <= 1e-2. Skips without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "pipeline/device.h"
#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/models/autoencoder.h"
#include "pipeline/models/random_weights.h"
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr int kSide = 128;  // latents per side: 16,384 tokens, as the SD VAE's latent at 1024²

AutoencoderConfig one_level_vae() {
  AutoencoderKLConfig kl;
  kl.block_out_channels = {512};
  kl.latent.pixels_per_latent = 1;  // 2^(levels - 1)
  return AutoencoderConfig{kl};
}

// The decode of `latent` (1, kSide, kSide, 4) on backend after `frames` frames.
std::vector<float> decode(Backend& backend, const AutoencoderConfig& config, const std::vector<float>& latent,
                          int frames) {
  const std::vector<TensorSpec> specs = autoencoder_parameters(config, DType::F32);
  WeightStore store(SafeTensorsFile::build("random one-level VAE", specs,
                                           [&](size_t i, uint8_t* out) { random_parameter(7, specs[i], out); }));
  Graph graph;
  const Ref in = graph.add_tensor("latent", Elem::Act, {1, kSide, kSide, config.latent().channels}, true);
  const auto builder = make_autoencoder_builder(config, store, graph, graph.frame, int(backend.act_bytes()));
  const Ref image = builder->decode(in, kSide, kSide);
  graph.tensors[image.id].persistent = true;  // read after the run
  backend.upload_weights(store);
  backend.prepare(graph);
  backend.write(in, latent.data(), latent.size());
  backend.run_setup();
  for (int i = 0; i < frames; ++i) backend.run_frame();
  std::vector<float> out = test::poisoned(size_t(kSide) * kSide * 3);
  backend.read(image, out.data(), out.size());
  return out;
}

TEST(VaeAttentionCuda, DecoderAt1024sAttentionMatchesTheCpu) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const AutoencoderConfig config = one_level_vae();
  std::vector<float> latent(size_t(kSide) * kSide * config.latent().channels);
  for (float& v : latent) v = rng.normal();
  std::string why;
  const auto cpu = make_backend(DeviceKind::Cpu, 0, KernelFamily::Auto, &why);
  const std::vector<float> want = decode(*cpu, config, latent, 1);
  for (const char* kernels : {"auto", "custom"}) {
    const auto gpu = make_backend(DeviceKind::Cuda, 0, kernel_family_named(kernels), &why);
    // One frame (eager, the default candidates) and four (auto tunes at the second; later frames replay a graph).
    for (int frames : {1, 4}) {
      const double err = test::rel_l2(decode(*gpu, config, latent, frames), want);
      std::printf("%s, %d frames: rel_l2 %.3g\n", kernels, frames, err);
      EXPECT_LE(err, 1e-2) << kernels << ", " << frames << " frames";
    }
  }
}

}  // namespace
}  // namespace rtvd
