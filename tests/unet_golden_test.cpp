// The U-Net on the CPU backend against golden outputs of the PyTorch reference (tools/reference,
// float64), for a conv-BN-SiLU class-conditional model and a GroupNorm cross-attention model, at two
// frame sizes each (the second non-square, to catch layout mix-ups).
#include <gtest/gtest.h>

#include <cstring>

#include "pipeline/backend.h"
#include "pipeline/model.h"
#include "pipeline/unet_runner.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

std::vector<float> floats(const TensorView& t) {
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

void check_golden(const std::string& model_dir, const std::string& golden_path, const std::string& suffix) {
  Model model = load_model(model_dir);
  const SafeTensorsFile golden = SafeTensorsFile::open(golden_path);
  const TensorView* x = golden.find("x" + suffix);
  ASSERT_NE(x, nullptr);
  const int batch = int(x->shape[0]), h = int(x->shape[1]), w = int(x->shape[2]);
  const std::vector<float> t = floats(*golden.find("t" + suffix));
  std::vector<int32_t> ids;
  if (const TensorView* c = golden.find("class_labels" + suffix)) {
    ids.resize(c->numel());
    std::memcpy(ids.data(), c->data, ids.size() * 4);
  }
  std::vector<float> context;
  if (const TensorView* c = golden.find("context" + suffix)) context = floats(*c);

  auto backend = make_cpu_backend(0);
  UNetRunner runner(model.config, *model.weights, *backend, batch, h, w, t[0]);
  model.weights->check_all_read();
  runner.set_inputs(floats(*x), ids, context);
  runner.forward();
  const std::vector<float> v = runner.output();
  const std::vector<float> ref = floats(*golden.find("v" + suffix));
  const double err = test::rel_l2(v, ref);
  EXPECT_LE(err, 1e-4) << model_dir << suffix << " at " << h << "x" << w;
}

void check_tiny(const std::string& name, const std::string& suffix) {
  const std::string dir = std::string(RTVD_TEST_DATA) + "/" + name;
  check_golden(dir, dir + "/golden.safetensors", suffix);
}

TEST(UNetGolden, BatchNormClassConditional) { check_tiny("tiny_batch", ""); }
TEST(UNetGolden, BatchNormClassConditionalNonSquare) { check_tiny("tiny_batch", "2"); }
TEST(UNetGolden, GroupNormCrossAttention) { check_tiny("tiny_group", ""); }
TEST(UNetGolden, GroupNormCrossAttentionNonSquare) { check_tiny("tiny_group", "2"); }

// The shipped default model (assets/default, fp16 weights) against PyTorch on the same weights and noise.
TEST(UNetGolden, ShippedDefaultModel) {
  check_golden(std::string(RTVD_SOURCE_DIR) + "/assets/default", std::string(RTVD_TEST_DATA) + "/default_golden.safetensors", "");
}

}  // namespace
}  // namespace rtvd
