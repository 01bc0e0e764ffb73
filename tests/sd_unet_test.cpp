// The SD 2.1 and SD 1.5 U-Nets as configs of the engine: the built-in configs, their parameters against
// diffusers' UNet2DConditionModel (names, count), the graph the builder makes of them at full size (heads,
// head dims, norm eps, FLOPs), and the random-weight generator against tools/reference/random_weights.py.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "base/error.h"
#include "pipeline/models/random_weights.h"
#include "pipeline/models/unet.h"
#include "support/model_configs.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

// The frame and setup ops of a batch-2 forward at the config's sample size. The checkpoint is zeros that
// are never touched (an anonymous mapping): building reads shapes, not values, so full size costs nothing.
struct BuiltGraph {
  ModelConfig cfg;
  std::unique_ptr<WeightStore> weights;
  Graph graph;

  explicit BuiltGraph(const std::string& name) : cfg(builtin_model_config(name)) {
    weights = std::make_unique<WeightStore>(
        SafeTensorsFile::build("zeros", unet_parameters(cfg), [](size_t, uint8_t*) {}));
    const int s = cfg.sample_size;
    Ref x = graph.add_tensor("x", Elem::Act, {2, s, s, cfg.in_channels}, true);
    Ref context = graph.add_tensor("context", Elem::Act, {2, cfg.context_length, cfg.cross_attention_dim}, true);
    UNetBuilder unet(cfg, *weights, graph, 2, 2);
    const CrossContext cross = unet.cross_context(context);
    const StepConditioning cond = unet.conditioning(0.5f, {}, "step0");
    unet.forward(x, s, s, cond, cross, "step0");
  }

  double flops() const {
    double f = 0;
    for (const auto* ops : {&graph.setup, &graph.frame})
      for (const Op& op : *ops) f += op.flops;
    return f;
  }

  // (heads, head dim) of every self-attention, by layer.
  std::map<std::string, std::pair<int, int>> self_attention() const {
    std::map<std::string, std::pair<int, int>> out;
    for (const Op& op : graph.frame)
      if (const auto* a = std::get_if<AttentionOp>(&op.body); a && op.layer.ends_with(".attn1"))
        out[op.layer] = {a->p.heads, a->p.head_dim};
    return out;
  }
};

TEST(SdConfigs, BuiltInByNameDirectoryOrFile) {
  EXPECT_EQ(builtin_config_names(), (std::vector<std::string>{"sd21", "sd15"}));
  for (const std::string name : {"sd21", "sd15"}) {
    const ModelConfig c = find_model_config(name);
    EXPECT_EQ(c.block_out_channels, (std::vector<int>{320, 640, 1280, 1280})) << name;
    EXPECT_EQ(c.attention_levels, (std::vector<bool>{true, true, true, false})) << name;
    EXPECT_EQ(c.layers_per_block, 2);
    EXPECT_EQ(c.norm, NormKind::Group);
    EXPECT_EQ(c.norm_num_groups, 32);
    EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
    EXPECT_TRUE(c.mid_attention);
    EXPECT_EQ(c.in_channels, 4);
    EXPECT_EQ(c.out_channels, 4);
    EXPECT_EQ(c.sample_size, 64);
    EXPECT_EQ(c.context_length, 77);
    EXPECT_EQ(c.num_class_embeds, 0);
    EXPECT_EQ(c.dtype, DType::F16);
  }
  const ModelConfig sd21 = builtin_model_config("sd21"), sd15 = builtin_model_config("sd15");
  EXPECT_EQ(sd21.cross_attention_dim, 1024);
  EXPECT_TRUE(sd21.use_linear_projection);
  EXPECT_EQ(sd15.cross_attention_dim, 768);
  EXPECT_FALSE(sd15.use_linear_projection);

  const std::string dir = test::test_data("sd21_small");
  EXPECT_EQ(find_model_config(dir).block_out_channels, (std::vector<int>{32, 64, 64, 64}));
  EXPECT_EQ(find_model_config(dir + "/config.json").attention_head_dim, 8);
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "config 'sd99': neither a built-in config (sd21, sd15)",
                      test::error_of([] { find_model_config("sd99"); }));
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "no built-in config 'x' (built in: sd21, sd15)",
                      test::error_of([] { builtin_model_config("x"); }));
}

// diffusers' UNet2DConditionModel: 686 tensors; stabilityai/stable-diffusion-2-1 865,910,724 parameters,
// runwayml/stable-diffusion-v1-5 859,520,964.
TEST(SdConfigs, ParametersAreDiffusersCheckpointKeys) {
  const auto sd21 = unet_parameters(builtin_model_config("sd21")), sd15 = unet_parameters(builtin_model_config("sd15"));
  EXPECT_EQ(sd21.size(), 686u);
  EXPECT_EQ(sd15.size(), 686u);
  EXPECT_EQ(test::parameter_count(sd21), 865'910'724);
  EXPECT_EQ(test::parameter_count(sd15), 859'520'964);
  std::map<std::string, std::vector<int64_t>> by_name;
  for (const TensorSpec& s : sd21) by_name[s.name] = s.shape;
  EXPECT_EQ(by_name.at("down_blocks.0.attentions.0.proj_in.weight"), (std::vector<int64_t>{320, 320}));
  EXPECT_EQ(by_name.at("up_blocks.1.attentions.2.transformer_blocks.0.attn2.to_k.weight"), (std::vector<int64_t>{1280, 1024}));
  EXPECT_EQ(by_name.at("up_blocks.0.resnets.0.conv_shortcut.weight"), (std::vector<int64_t>{1280, 2560, 1, 1}));
  EXPECT_EQ(by_name.at("mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj.weight"), (std::vector<int64_t>{10240, 1280}));
  EXPECT_EQ(by_name.at("up_blocks.3.resnets.0.conv1.weight"), (std::vector<int64_t>{320, 960, 3, 3}));
  for (const TensorSpec& s : sd15)
    if (s.name == "down_blocks.2.attentions.1.proj_out.weight") EXPECT_EQ(s.shape, (std::vector<int64_t>{1280, 1280, 1, 1}));
}

// Heads and head dims as diffusers derives them: SD 2.1 heads of dim 64 (5/10/20 heads), SD 1.5 8 heads
// (dims 40/80/160); every checkpoint tensor is used; the FLOPs docs/perf-notes.md counts (1.61 TFLOP a batch-2 forward).
TEST(SdConfigs, FullSizeGraphs) {
  const BuiltGraph sd21("sd21"), sd15("sd15");
  sd21.weights->check_all_read();
  sd15.weights->check_all_read();
  const std::map<int, int> sd21_heads = {{320, 5}, {640, 10}, {1280, 20}}, sd15_dims = {{320, 40}, {640, 80}, {1280, 160}};
  for (const auto& [layer, hd] : sd21.self_attention()) {
    EXPECT_EQ(hd.second, 64) << layer;
    EXPECT_EQ(sd21_heads.at(hd.first * hd.second), hd.first) << layer;
  }
  for (const auto& [layer, hd] : sd15.self_attention()) {
    EXPECT_EQ(hd.first, 8) << layer;
    EXPECT_EQ(sd15_dims.at(hd.first * hd.second), hd.second) << layer;
  }
  EXPECT_EQ(sd21.self_attention().size(), 16u);  // 2 per down level x 3, mid, 3 per up level x 3

  // GroupNorm eps: 1e-5 (norm_eps) in ResNets and conv_norm_out, 1e-6 in Transformer2DModel's input norm;
  // LayerNorm eps 1e-5.
  for (const Op& op : sd21.graph.frame) {
    if (const auto* g = std::get_if<GroupNormOp>(&op.body)) {
      const bool transformer = op.layer.find(".attentions.") != std::string::npos;
      EXPECT_FLOAT_EQ(g->p.eps, transformer ? 1e-6f : 1e-5f) << op.layer;
      EXPECT_EQ(g->p.groups, 32) << op.layer;
    }
    if (const auto* l = std::get_if<LayerNormOp>(&op.body)) EXPECT_FLOAT_EQ(l->p.eps, 1e-5f) << op.layer;
  }
  // 1.61 TFLOP per batch-2 forward (803 GFLOP per image): convs, linears, attention.
  EXPECT_NEAR(sd21.flops() / 1e12, 1.61, 0.01);
}

// Bit for bit the values tools/reference/random_weights.py made (tests/data/random_weights.safetensors:
// the first values of a few tensors, full-size SD ones with fp16 subnormals among them).
TEST(RandomWeights, SameAsTheReferenceGenerator) {
  const SafeTensorsFile samples = SafeTensorsFile::open(test::test_data("random_weights.safetensors"));
  const uint64_t seed = std::stoull(samples.metadata().at("seed"));
  ASSERT_EQ(samples.tensors().size(), 5u);
  for (const TensorView& t : samples.tensors()) {
    TensorSpec spec{t.name, t.dtype, {}};
    std::stringstream shape(samples.metadata().at("shape." + t.name));
    for (std::string d; std::getline(shape, d, ',');) spec.shape.push_back(std::stoll(d));
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    std::vector<uint8_t> values(size_t(n) * dtype_size(t.dtype));
    random_parameter(seed, spec, values.data());
    EXPECT_EQ(std::memcmp(values.data(), t.data, t.bytes), 0) << t.name;
  }
}

// A value depends on (seed, name, index) only: the same checkpoint on one thread or all, another seed
// differs everywhere.
TEST(RandomWeights, IndependentOfThreadsAndSeeded) {
  const ModelConfig cfg = load_model_config(test::test_data("sd15_small/config.json"));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const SafeTensorsFile one = random_checkpoint(cfg, 3);
  omp_set_num_threads(std::max(threads, 2));
  const SafeTensorsFile all = random_checkpoint(cfg, 3), other = random_checkpoint(cfg, 4);
  omp_set_num_threads(threads);
  ASSERT_EQ(one.tensors().size(), all.tensors().size());
  for (size_t i = 0; i < one.tensors().size(); ++i) {
    const TensorView &a = one.tensors()[i], &b = all.tensors()[i], &c = other.tensors()[i];
    EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes), 0) << a.name;
    EXPECT_NE(std::memcmp(a.data, c.data, a.bytes), 0) << a.name;
  }
}

}  // namespace
}  // namespace rtvd
