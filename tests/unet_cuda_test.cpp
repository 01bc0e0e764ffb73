// The whole U-Net and the whole frame on the CUDA backend against the CPU backend (fp32 reference), on
// fresh random inputs: the tiny test models, the default model, and graph replay against eager runs.
#include <gtest/gtest.h>

#include <cstring>

#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "pipeline/model.h"
#include "pipeline/unet_runner.h"
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

std::unique_ptr<Backend> cuda_backend() {
  std::string why;
  return make_backend("cuda", 0, "custom", &why);
}

void compare_unet(const std::string& dir, int batch, int h, int w) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const float t = rng.uniform(0.05f, 0.95f);
  Model cpu_model = load_model(dir), gpu_model = load_model(dir);
  const ModelConfig& c = cpu_model.config;
  const std::vector<float> x = rng.normal_vector(size_t(batch) * h * w * c.in_channels);
  std::vector<int32_t> ids;
  for (int i = 0; i < batch && c.num_class_embeds > 0; ++i) ids.push_back(rng.integer(0, c.num_class_embeds - 1));
  std::vector<float> context;
  if (c.cross_attention_dim > 0) context = rng.normal_vector(size_t(batch) * c.context_length * c.cross_attention_dim);

  auto cpu = make_cpu_backend(0);
  UNetRunner ref(c, *cpu_model.weights, *cpu, batch, h, w, t);
  ref.set_inputs(test::round_to_half(x), ids, test::round_to_half(context));
  ref.forward();
  auto gpu = cuda_backend();
  UNetRunner run(c, *gpu_model.weights, *gpu, batch, h, w, t);
  run.set_inputs(x, ids, context);
  run.forward();
  const double err = test::rel_l2(run.output(), ref.output());
  EXPECT_LE(err, 1e-2) << dir << " " << h << "x" << w;
}

TEST(UNetCuda, TinyBatchNormModelMatchesCpu) {
  RTVD_SKIP_WITHOUT_CUDA();
  compare_unet(std::string(RTVD_TEST_DATA) + "/tiny_batch", 2, 16, 24);
}

TEST(UNetCuda, TinyGroupNormCrossAttentionModelMatchesCpu) {
  RTVD_SKIP_WITHOUT_CUDA();
  compare_unet(std::string(RTVD_TEST_DATA) + "/tiny_group", 2, 16, 8);
}

TEST(UNetCuda, DefaultModelMatchesCpu) {
  RTVD_SKIP_WITHOUT_CUDA();
  compare_unet(std::string(RTVD_SOURCE_DIR) + "/assets/default", 2, 64, 64);
}

// The shipped default model on the GPU (fp16) against PyTorch (float64) on the same weights and noise.
TEST(UNetCuda, ShippedDefaultModelMatchesPyTorch) {
  RTVD_SKIP_WITHOUT_CUDA();
  Model model = load_model(std::string(RTVD_SOURCE_DIR) + "/assets/default");
  const SafeTensorsFile golden = SafeTensorsFile::open(std::string(RTVD_TEST_DATA) + "/default_golden.safetensors");
  auto floats = [&](const char* name) {
    const TensorView& t = *golden.find(name);
    std::vector<float> v(t.numel());
    std::memcpy(v.data(), t.data, v.size() * 4);
    return v;
  };
  const TensorView& x = *golden.find("x");
  std::vector<int32_t> ids(2);
  std::memcpy(ids.data(), golden.find("class_labels")->data, 8);
  auto gpu = cuda_backend();
  UNetRunner run(model.config, *model.weights, *gpu, int(x.shape[0]), int(x.shape[1]), int(x.shape[2]), floats("t")[0]);
  run.set_inputs(floats("x"), ids, {});
  run.forward();
  EXPECT_LE(test::rel_l2(run.output(), floats("v")), 1e-2);
}

// Frames from the CUDA graph replay must equal eager frames bit for bit, and match the CPU engine.
TEST(UNetCuda, GraphReplayEqualsEagerAndCpuFrames) {
  RTVD_SKIP_WITHOUT_CUDA();
  EngineOptions o;
  o.device = "cuda";
  o.kernels = "custom";
  FrameSettings s;
  s.seed = test::Rng().gen();
  s.blend = 0.0f;  // every frame stands alone, so an eager engine can render the same frame
  Engine graph_engine(o);
  graph_engine.configure(s, false);
  std::vector<ImageRgba8> replayed;
  for (int i = 0; i < 4; ++i) replayed.push_back(graph_engine.render(nullptr));  // frames 2..: graph replays

  for (int i = 0; i < 4; ++i) {
    Engine eager(o);  // a fresh engine runs its first frame eagerly
    eager.configure(s, false);
    for (int j = 0; j < i; ++j) eager.backend().ops_changed(), eager.render(nullptr);
    eager.backend().ops_changed();
    EXPECT_EQ(eager.render(nullptr).pixels, replayed[i].pixels) << "frame " << i;
  }

  EngineOptions co;
  co.device = "cpu";
  Engine cpu(co);
  cpu.configure(s, false);
  for (int i = 0; i < 4; ++i) {
    const ImageRgba8& f = cpu.render(nullptr);
    int far = 0;
    for (size_t k = 0; k < f.pixels.size(); ++k) far += std::abs(int(f.pixels[k]) - int(replayed[i].pixels[k])) > 8;
    EXPECT_LE(far, int(f.pixels.size() / 100)) << "frame " << i << ": pixels off by more than 8/255";
  }
}

}  // namespace
}  // namespace rtvd
