// The U-Net on the CPU backend against golden outputs of the PyTorch reference (tools/reference,
// float64), for a conv-BN-SiLU class-conditional model, a GroupNorm cross-attention model and the SD 2.1
// and SD 1.5 U-Nets at a scaled-down width (weights from the shared counter-based generator), at two frame
// sizes each (the second non-square, to catch layout mix-ups).
#include <gtest/gtest.h>

#include "pipeline/backends/backend.h"
#include "pipeline/models/model.h"
#include "pipeline/unet_runner.h"
#include "support/golden.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

void check_golden(Model model, const std::string& golden_path, const std::string& suffix) {
  const test::GoldenCase g = test::read_golden(SafeTensorsFile::open(golden_path), suffix);
  auto backend = make_cpu_backend(0);
  UNetRunner runner(model.config, *model.weights, *backend, g.batch, g.height, g.width, g.t);
  model.weights->check_all_read();
  runner.set_inputs(g.x, g.class_ids, g.context);
  runner.forward();
  const double err = test::rel_l2(runner.output(), g.v);
  EXPECT_LE(err, 1e-4) << model.source << suffix << " at " << g.height << "x" << g.width;
}

void check_tiny(const std::string& name, const std::string& suffix) {
  const std::string dir = test::test_data(name);
  check_golden(load_model({.path = dir}), dir + "/golden.safetensors", suffix);
}

// A model whose golden was computed with generated weights (tools/reference/random_weights.py): the
// engine generates the same ones from the seed in the golden's metadata.
void check_generated(const std::string& name, const std::string& suffix) {
  const std::string dir = test::test_data(name);
  check_golden(test::generated_golden_model(dir), dir + "/golden.safetensors", suffix);
}

TEST(UNetGolden, BatchNormClassConditional) { check_tiny("tiny_batch", ""); }
TEST(UNetGolden, BatchNormClassConditionalNonSquare) { check_tiny("tiny_batch", "2"); }
TEST(UNetGolden, GroupNormCrossAttention) { check_tiny("tiny_group", ""); }
TEST(UNetGolden, GroupNormCrossAttentionNonSquare) { check_tiny("tiny_group", "2"); }

TEST(UNetGolden, Sd21StructureScaledDown) { check_generated("sd21_small", ""); }
TEST(UNetGolden, Sd21StructureScaledDownNonSquare) { check_generated("sd21_small", "2"); }
TEST(UNetGolden, Sd15StructureScaledDown) { check_generated("sd15_small", ""); }
TEST(UNetGolden, Sd15StructureScaledDownNonSquare) { check_generated("sd15_small", "2"); }

// The shipped default model (assets/default, fp16 weights) against PyTorch on the same weights and noise.
TEST(UNetGolden, ShippedDefaultModel) {
  check_golden(load_model({.path = test::assets_dir() + "/default"}),
               test::test_data("default_golden.safetensors"), "");
}

}  // namespace
}  // namespace rtvd
