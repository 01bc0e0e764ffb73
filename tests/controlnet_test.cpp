// ControlNets (diffusers' ControlNetModel) on the CPU: the config as published ControlNets write it and its
// refusals, one line each; the graph's residuals have the shapes of the U-Net's skips and every parameter is
// read (SD's structure and SDXL's, with its added embedding); a U-Net given zero residuals computes what it
// computes without (and has no op for them without); and tests/data/tiny_controlnet
// (tools/reference/export_tiny_controlnet.py) against diffusers: each net's residuals, their sum, and the
// U-Net's output given them, relative L2 <= 1e-4.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/backends/backend.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_controlnet_config.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/models/controlnet.h"
#include "pipeline/models/random_weights.h"
#include "support/controlnet_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;
using test::error_of;

// An SD 1.5 ControlNet's config.json with the keys diffusers' ControlNetModel writes.
constexpr const char* kSd15ControlNet = R"({
  "_class_name": "ControlNetModel",
  "_diffusers_version": "0.16.0.dev0",
  "act_fn": "silu",
  "attention_head_dim": 8,
  "block_out_channels": [320, 640, 1280, 1280],
  "class_embed_type": null,
  "conditioning_embedding_out_channels": [16, 32, 96, 256],
  "controlnet_conditioning_channel_order": "rgb",
  "cross_attention_dim": 768,
  "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
  "downsample_padding": 1,
  "flip_sin_to_cos": true,
  "freq_shift": 0,
  "global_pool_conditions": false,
  "in_channels": 4,
  "layers_per_block": 2,
  "mid_block_scale_factor": 1,
  "norm_eps": 1e-05,
  "norm_num_groups": 32,
  "num_class_embeds": null,
  "only_cross_attention": false,
  "projection_class_embeddings_input_dim": null,
  "resnet_time_scale_shift": "default",
  "upcast_attention": false,
  "use_linear_projection": false
})";

const char* kLabel = "controlnet/config.json";

TEST(ControlNetConfig, PublishedSd15ConfigMaps) {
  const ControlNetConfig c = parse_diffusers_controlnet_config(kSd15ControlNet, kLabel, DType::F16);
  EXPECT_EQ(c.encoder.block_out_channels, (std::vector<int>{320, 640, 1280, 1280}));
  EXPECT_EQ(c.encoder.attention_levels, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(c.encoder.num_attention_heads, 8);
  EXPECT_EQ(c.encoder.cross_attention_dim, 768);
  EXPECT_FALSE(c.encoder.use_linear_projection);
  EXPECT_EQ(c.encoder.in_channels, 4);
  EXPECT_EQ(c.conditioning_channels, 3);
  EXPECT_EQ(c.conditioning_embedding_out_channels, (std::vector<int>{16, 32, 96, 256}));
  EXPECT_EQ(c.image_factor(), 8);
  EXPECT_FALSE(c.global_pool_conditions);
  // The same encoder keys as the U-Net's, read by the same code: the U-Net of this config.
  json unet = json::parse(kSd15ControlNet);
  for (const char* key : {"conditioning_embedding_out_channels", "controlnet_conditioning_channel_order",
                          "global_pool_conditions"})
    unet.erase(key);
  unet["_class_name"] = "UNet2DConditionModel";
  unet["sample_size"] = 64;
  const ModelConfig u = parse_diffusers_unet_config(unet.dump(), "unet", DType::F16);
  EXPECT_EQ(u.num_attention_heads, c.encoder.num_attention_heads);
  EXPECT_EQ(u.transformer_layers_per_block, c.encoder.transformer_layers_per_block);
}

// Each change to the published config: one line naming the file and the key.
TEST(ControlNetConfig, RefusalsNameFileAndKey) {
  const std::vector<std::pair<const char*, json>> changes = {
      {"controlnet_conditioning_channel_order", "bgr"},
      {"conditioning_embedding_out_channels", json::array()},
      {"conditioning_channels", 0},
      {"mid_block_type", "UNetMidBlock2D"},
      {"_class_name", "UNet2DConditionModel"},
      {"sample_size", 64},  // a U-Net's key: ControlNetModel has none
      {"addition_embed_type", "text"},
  };
  for (const auto& [key, value] : changes) {
    json j = json::parse(kSd15ControlNet);
    j[key] = value;
    const std::string e = error_of([&] { parse_diffusers_controlnet_config(j.dump(), kLabel, DType::F16); });
    EXPECT_NE(e.find(kLabel), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find(cat("'", key, "'")), std::string::npos) << key << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << key << ": " << e;
  }
}

// global_pool_conditions is kept by the config and refused where residuals are built.
TEST(ControlNetConfig, GlobalPoolingRefusedByTheBuilder) {
  json j = json::parse(kSd15ControlNet);
  j["global_pool_conditions"] = true;
  const ControlNetConfig c = parse_diffusers_controlnet_config(j.dump(), kLabel, DType::F16);
  EXPECT_TRUE(c.global_pool_conditions);
  WeightStore weights{TensorSet("no weights")};
  Graph g;
  const std::string e = error_of([&] { ControlNetBuilder(c, weights, g, 1, 4, ""); });
  EXPECT_NE(e.find(kLabel), std::string::npos) << e;
  EXPECT_NE(e.find("'global_pool_conditions'"), std::string::npos) << e;
}

// tests/data/tiny_sd's U-Net (32/64 channels, one ResNet per level, attention at the top and in the mid block),
// fp32, and a ControlNet of it.
ModelConfig tiny_unet() {
  const std::string path = test::test_data("tiny_sd/unet/config.json");
  return parse_diffusers_unet_config(read_config_file(path), path, DType::F32);
}

ControlNetConfig tiny_controlnet(const ModelConfig& unet) {
  ControlNetConfig c;
  c.encoder = unet;
  c.conditioning_embedding_out_channels = {4, 8, 8};  // the image at 4x the latents
  return c;
}

// The U-Net (random weights, seed 1) and a ControlNet of it (random weights, seed 2, under "controlnet.0.") in
// one store; x and context as graph inputs.
struct TinyGraph {
  ModelConfig cfg = tiny_unet();
  ControlNetConfig net = tiny_controlnet(cfg);
  std::vector<TensorSpec> net_specs = controlnet_parameters(net);
  std::unique_ptr<WeightStore> weights;
  Graph g;
  int n = 2, h = 8, w = 4;
  Ref x, context;

  TinyGraph() {
    TensorSet set(random_checkpoint(cfg, 1));
    set.add_all(TensorSet(SafeTensorsFile::build("controlnet", net_specs, [&](size_t i, uint8_t* out) {
                  random_parameter(2, net_specs[i], out);
                })),
                "controlnet.0.");
    weights = std::make_unique<WeightStore>(std::move(set));
    x = g.add_tensor("x", Elem::Act, {n, h, w, cfg.in_channels}, true);
    context = g.add_tensor("context", Elem::Act, {n, cfg.context_length, cfg.cross_attention_dim}, true);
  }
  int64_t numel(Ref r) const { return g.tensors.at(r.id).numel(); }
};

// Every residual has its skip's shape (the tensor the U-Net adds it to), every parameter of both is read, and
// each net's op is named under its prefix.
TEST(ControlNetGraph, ResidualsHaveTheSkipsShapes) {
  TinyGraph t;
  UNetBuilder unet(t.cfg, *t.weights, t.g, t.n, 4);
  ControlNetBuilder cn(t.net, *t.weights, t.g, t.n, 4, "controlnet.0.");
  const Ref image = t.g.add_tensor("image", Elem::Act, {t.n, 4 * t.h, 4 * t.w, 3}, true);
  const StepConditioning cond = unet.conditioning(0.5, {}, "unet"), net_cond = cn.conditioning(0.5, {}, "net");
  const ControlResiduals r = cn.forward(t.x, image, t.h, t.w, net_cond, cn.cross_context(t.context), "net", 0.5f);
  unet.forward(t.x, t.h, t.w, cond, unet.cross_context(t.context), "unet", nullptr, {&r, 1});
  t.weights->check_all_read();

  // conv_in's, then level 0's ResNet and downsampler, then level 1's ResNet: 4 skips.
  ASSERT_EQ(r.down.size(), 4u);
  // The skips' tensors: (n, h, w, c), or (n h w, c) where a transformer made them.
  std::vector<Ref> skips;
  Ref mid;
  for (const Op& op : t.g.frame)
    if (const auto* s = std::get_if<ScaleActivationOp>(&op.body)) {
      if (op.layer.starts_with("down_residual.")) skips.push_back(s->x);
      if (op.layer == "mid_residual") mid = s->x;
    }
  ASSERT_EQ(skips.size(), r.down.size());
  ASSERT_TRUE(mid);
  const std::vector<std::vector<int64_t>> expected = {
      {t.n, t.h, t.w, 32}, {t.n, t.h, t.w, 32}, {t.n, t.h / 2, t.w / 2, 32}, {t.n, t.h / 2, t.w / 2, 64}};
  for (size_t i = 0; i < skips.size(); ++i) {
    EXPECT_EQ(t.g.tensors.at(r.down[i].id).shape, expected[i]) << i;
    EXPECT_EQ(t.numel(skips[i]), t.numel(r.down[i])) << i;
    EXPECT_EQ(t.g.tensors.at(skips[i].id).shape.back(), expected[i].back()) << i;
  }
  EXPECT_EQ(t.g.tensors.at(r.mid.id).shape, (std::vector<int64_t>{t.n, t.h / 2, t.w / 2, 64}));
  EXPECT_EQ(t.g.tensors.at(mid.id).shape, t.g.tensors.at(r.mid.id).shape);
  for (const Op& op : t.g.frame)
    if (op.layer.find("controlnet") != std::string::npos)
      EXPECT_TRUE(op.layer.starts_with("controlnet.0.")) << op.layer;
}

// An SDXL ControlNet (tests/data/tiny_sdxl's U-Net: text_time, no attention at the top level, 2 transformer
// layers deeper) builds from the same code with its added embedding, every parameter read; its residuals fit
// that U-Net's skips.
TEST(ControlNetGraph, SdxlStructureBuilds) {
  const std::string path = test::test_data("tiny_sdxl/unet/config.json");
  ControlNetConfig net;
  net.encoder = parse_diffusers_unet_config(read_config_file(path), path, DType::F32);
  net.conditioning_embedding_out_channels = {4, 8};
  const ModelConfig& cfg = net.encoder;
  TensorSet set(SafeTensorsFile::build("unet", unet_parameters(cfg), [](size_t, uint8_t*) {}));
  set.add_all(TensorSet(SafeTensorsFile::build("controlnet", controlnet_parameters(net), [](size_t, uint8_t*) {})),
              "controlnet.0.");
  WeightStore weights(std::move(set));
  Graph g;
  const int n = 2, h = 8, w = 8;
  const Ref x = g.add_tensor("x", Elem::Act, {n, h, w, cfg.in_channels}, true);
  const Ref context = g.add_tensor("context", Elem::Act, {n, cfg.context_length, cfg.cross_attention_dim}, true);
  const Ref text = g.add_tensor("text_embeds", Elem::Act, {n, cfg.text_embeds_dim()}, true);
  const Ref ids = g.add_tensor("time_ids", Elem::F32, {n, ModelConfig::kTimeIds}, true);
  const Ref image = g.add_tensor("image", Elem::Act, {n, 2 * h, 2 * w, 3}, true);
  UNetBuilder unet(cfg, weights, g, n, 2);
  ControlNetBuilder cn(net, weights, g, n, 2, "controlnet.0.");
  const StepConditioning cond = unet.conditioning(0.5, {}, "unet", unet.added_embedding(text, ids));
  const StepConditioning net_cond = cn.conditioning(0.5, {}, "net", cn.added_embedding(text, ids));
  const ControlResiduals r = cn.forward(x, image, h, w, net_cond, cn.cross_context(context), "net", 1.0f);
  // conv_in's, each level's ResNets', each downsampler's (none at the last level)
  EXPECT_EQ(r.down.size(), size_t(cfg.levels() * (cfg.layers_per_block + 1)));
  unet.forward(x, h, w, cond, unet.cross_context(context), "unet", nullptr, {&r, 1});
  weights.check_all_read();
}

// The U-Net given zero residuals computes exactly what it computes without them, and random residuals change
// its output (so the comparison can fail); without residuals the graph has no op for them.
TEST(ControlNetGraph, ZeroResidualsChangeNothing) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  TinyGraph t;
  UNetBuilder unet(t.cfg, *t.weights, t.g, t.n, 4);
  const StepConditioning cond = unet.conditioning(0.3, {}, "unet");
  const CrossContext cross = unet.cross_context(t.context);
  const Ref plain = unet.forward(t.x, t.h, t.w, cond, cross, "plain");
  const size_t plain_ops = t.g.frame.size();
  for (const Op& op : t.g.frame) EXPECT_EQ(op.layer.find("residual"), std::string::npos) << op.layer;

  ControlResiduals r;
  for (const auto& [h, w, c] : {std::tuple{8, 4, 32}, {8, 4, 32}, {4, 2, 32}, {4, 2, 64}})
    r.down.push_back(t.g.add_tensor(cat("r", r.down.size()), Elem::Act, {t.n, h, w, c}, true));
  r.mid = t.g.add_tensor("r_mid", Elem::Act, {t.n, 4, 2, 64}, true);
  const Ref with = unet.forward(t.x, t.h, t.w, cond, cross, "with", nullptr, {&r, 1});
  EXPECT_EQ(t.g.frame.size(), 2 * plain_ops + r.down.size() + 1);
  t.g.tensors.at(plain.id).persistent = t.g.tensors.at(with.id).persistent = true;

  auto cpu = make_cpu_backend(0);
  cpu->upload_weights(*t.weights);
  cpu->prepare(t.g);
  // Random values into `ref`, or zeros.
  auto write = [&](Ref ref, bool zero = false) {
    const size_t n = size_t(t.numel(ref));
    const std::vector<float> v = zero ? std::vector<float>(n) : rng.normal_vector(n);
    cpu->write(ref, v.data(), n);
  };
  write(t.x);
  write(t.context);
  auto fill = [&](bool zero) {
    for (Ref d : r.down) write(d, zero);
    write(r.mid, zero);
  };
  auto read = [&](Ref ref) {
    std::vector<float> v(size_t(t.numel(ref)));
    cpu->read(ref, v.data(), v.size());
    return v;
  };
  cpu->run_setup();
  fill(true);
  cpu->run_frame();
  const std::vector<float> without = read(plain);
  EXPECT_EQ(read(with), without);
  fill(false);
  cpu->run_frame();
  EXPECT_GT(test::rel_l2(read(with), without), 1e-2);
  EXPECT_EQ(read(plain), without);
}

// tiny_controlnet against diffusers: net 1's residuals, both nets' summed, the U-Net's output given either.
TEST(TinyControlNet, MatchesDiffusers) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  float scales[2];
  const auto cases = test::read_controlnet_cases(dir, scales);
  ASSERT_GE(cases.size(), 2u);
  auto cpu = make_cpu_backend(0);
  for (const test::ControlNetCase& c : cases) {
    SCOPED_TRACE(cat(c.name, ": batch ", c.batch, ", ", c.height, "x", c.width, ", t ", c.t));
    // The second net moves the output far beyond the tolerance: the comparison sees both.
    EXPECT_GT(test::rel_l2(c.expected.output_sum, c.expected.output1), 1e-2);
    test::expect_near(test::run_controlnets(*cpu, dir, c, scales), c.expected, 1e-4);
  }
}

}  // namespace
}  // namespace rtvd
