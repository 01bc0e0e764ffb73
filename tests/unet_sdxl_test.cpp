// The SDXL U-Net (diffusers' UNet2DConditionModel with addition_embed_type "text_time"): its published config
// maps, builds at full size with SDXL's parameter count and heads, and the scaled-down model of
// tests/data/tiny_sdxl (diffusers' save_pretrained, tools/reference/export_tiny_sdxl.py) on the CPU matches
// diffusers' fp32 outputs on every case; the added conditioning reaches the output; bad configs fail with
// one line naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "pipeline/backends/backend.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/models/unet.h"
#include "pipeline/unet_runner.h"
#include "support/model_configs.h"
#include "support/sdxl_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;
using test::error_of;
using testing::IsSubstring;

// stabilityai/stable-diffusion-xl-base-1.0, unet/config.json as published (sdxl-turbo's has the same keys).
constexpr const char* kSdxlBase = R"({
  "_class_name": "UNet2DConditionModel",
  "_diffusers_version": "0.19.0.dev0",
  "act_fn": "silu",
  "addition_embed_type": "text_time",
  "addition_embed_type_num_heads": 64,
  "addition_time_embed_dim": 256,
  "attention_head_dim": [5, 10, 20],
  "block_out_channels": [320, 640, 1280],
  "center_input_sample": false,
  "class_embed_type": null,
  "class_embeddings_concat": false,
  "conv_in_kernel": 3,
  "conv_out_kernel": 3,
  "cross_attention_dim": 2048,
  "cross_attention_norm": null,
  "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
  "downsample_padding": 1,
  "dual_cross_attention": false,
  "encoder_hid_dim": null,
  "encoder_hid_dim_type": null,
  "flip_sin_to_cos": true,
  "freq_shift": 0,
  "in_channels": 4,
  "layers_per_block": 2,
  "mid_block_only_cross_attention": null,
  "mid_block_scale_factor": 1,
  "mid_block_type": "UNetMidBlock2DCrossAttn",
  "norm_eps": 1e-05,
  "norm_num_groups": 32,
  "num_attention_heads": null,
  "num_class_embeds": null,
  "only_cross_attention": false,
  "out_channels": 4,
  "projection_class_embeddings_input_dim": 2816,
  "resnet_out_scale_factor": 1.0,
  "resnet_skip_time_act": false,
  "resnet_time_scale_shift": "default",
  "sample_size": 128,
  "time_cond_proj_dim": null,
  "time_embedding_act_fn": null,
  "time_embedding_dim": null,
  "time_embedding_type": "positional",
  "timestep_post_act": null,
  "transformer_layers_per_block": [1, 2, 10],
  "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
  "upcast_attention": null,
  "use_linear_projection": true
})";

TEST(SdxlUNetConfig, PublishedConfigMaps) {
  const ModelConfig c = parse_diffusers_unet_config(kSdxlBase, "sdxl/unet/config.json", DType::F16);
  EXPECT_EQ(c.block_out_channels, (std::vector<int>{320, 640, 1280}));
  EXPECT_EQ(c.attention_levels, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.transformer_layers_per_block, (std::vector<int>{1, 2, 10}));
  EXPECT_EQ(c.attention_head_dim, 64);  // 10/20 heads of 640/1280 channels
  EXPECT_EQ(c.cross_attention_dim, 2048);
  EXPECT_EQ(c.addition_time_embed_dim, 256);
  EXPECT_EQ(c.projection_class_embeddings_input_dim, 2816);
  EXPECT_EQ(c.text_embeds_dim(), 1280);  // OpenCLIP ViT-bigG's pooled projection
  EXPECT_EQ(c.time_embed_dim(), 1280);
}

// diffusers' 2,567,463,684 parameters for the published SDXL U-Net.
TEST(SdxlUNetConfig, ParameterCount) {
  const ModelConfig cfg = parse_diffusers_unet_config(kSdxlBase, "sdxl", DType::F16);
  EXPECT_EQ(test::parameter_count(unet_parameters(cfg)), 2'567'463'684);
}

// The published SDXL U-Net at a tenth of its width (32/64/128 channels, 1/1/2 heads: still of 64), built on
// zeros that are never read (building reads shapes only): every parameter in the graph; 10 transformer
// blocks in the last level's down and up blocks and in the mid block, 2 at the level above; the added
// embedding in setup.
TEST(SdxlUNetConfig, GraphOfSdxlStructure) {
  json j = json::parse(kSdxlBase);
  j["block_out_channels"] = {32, 64, 128};
  j["attention_head_dim"] = {1, 1, 2};
  const ModelConfig cfg = parse_diffusers_unet_config(j.dump(), "sdxl narrowed", DType::F16);
  WeightStore weights(SafeTensorsFile::build("zeros", unet_parameters(cfg), [](size_t, uint8_t*) {}));
  Graph graph;
  const int batch = 2, side = cfg.sample_size;
  Ref x = graph.add_tensor("x", Elem::Act, {batch, side, side, cfg.in_channels}, true);
  Ref context = graph.add_tensor("context", Elem::Act, {batch, cfg.context_length, cfg.cross_attention_dim}, true);
  Ref text = graph.add_tensor("text_embeds", Elem::Act, {batch, cfg.text_embeds_dim()}, true);
  Ref ids = graph.add_tensor("time_ids", Elem::F32, {batch, ModelConfig::kTimeIds}, true);
  UNetBuilder unet(cfg, weights, graph, batch, 2);
  const Ref added = unet.added_embedding(text, ids);
  const CrossContext cross = unet.cross_context(context);
  unet.forward(x, side, side, unet.conditioning(0.5, {}, "step0", added), cross, "step0");
  weights.check_all_read();

  std::map<std::string, int> blocks;  // self-attentions per transformer
  for (const Op& op : graph.frame)
    if (const auto* a = std::get_if<AttentionOp>(&op.body); a && op.layer.ends_with(".attn1")) {
      EXPECT_EQ(a->p.head_dim, 64) << op.layer;
      ++blocks[op.layer.substr(0, op.layer.find(".transformer_blocks."))];
    }
  EXPECT_EQ(blocks.size(), 4u + 1u + 6u);  // 2 per down level, the mid block, 3 per up level
  EXPECT_EQ(blocks.at("down_blocks.1.attentions.1"), 2);
  EXPECT_EQ(blocks.at("down_blocks.2.attentions.0"), 10);
  EXPECT_EQ(blocks.at("mid_block.attentions.0"), 10);
  EXPECT_EQ(blocks.at("up_blocks.0.attentions.2"), 10);
  EXPECT_EQ(blocks.at("up_blocks.1.attentions.0"), 2);
  bool setup_has_added = false;
  for (const Op& op : graph.setup) setup_has_added |= op.layer == "add_embedding.linear_2";
  EXPECT_TRUE(setup_has_added);
}

const std::string kTiny = "tiny_sdxl";

TEST(TinySdxlUNet, ConfigMaps) {
  const test::DiffusersUNet u = test::load_diffusers_unet(test::test_data(kTiny + "/unet"));
  const ModelConfig& c = u.config;
  EXPECT_EQ(c.block_out_channels, (std::vector<int>{16, 24, 32}));
  EXPECT_EQ(c.attention_levels, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.transformer_layers_per_block, (std::vector<int>{1, 2, 2}));
  EXPECT_EQ(c.attention_head_dim, 8);  // 3/4 heads of 24/32 channels
  EXPECT_EQ(c.layers_per_block, 2);
  EXPECT_EQ(c.cross_attention_dim, 64);
  EXPECT_EQ(c.addition_time_embed_dim, 8);
  EXPECT_EQ(c.text_embeds_dim(), 32);
}

// rtvd's CPU U-Net against diffusers, every case: relative L2 <= 1e-4, every tensor of the file used.
TEST(TinySdxlUNet, MatchesDiffusers) {
  test::DiffusersUNet u = test::load_diffusers_unet(test::test_data(kTiny + "/unet"));
  const auto cases = test::read_sdxl_reference(test::test_data(kTiny + "/unet_reference.safetensors"));
  ASSERT_GE(cases.size(), 2u);
  auto cpu = make_cpu_backend(0);
  for (const test::SdxlCase& c : cases) {
    UNetRunner runner(u.config, *u.weights, *cpu, c.batch, c.height, c.width, c.t);
    u.weights->check_all_read();
    runner.set_inputs(c.x, {}, c.context, c.text_embeds, c.time_ids);
    runner.forward();
    EXPECT_LE(test::rel_l2(runner.output(), c.v), 1e-4)
        << c.name << ": batch " << c.batch << ", " << c.height << "x" << c.width << ", t " << c.t;
  }
}

// The comparison above sees the added conditioning: with the two images' time ids, or pooled text
// embeddings, swapped, the output is far from diffusers'.
TEST(TinySdxlUNet, AddedConditioningReachesTheOutput) {
  test::DiffusersUNet u = test::load_diffusers_unet(test::test_data(kTiny + "/unet"));
  const auto cases = test::read_sdxl_reference(test::test_data(kTiny + "/unet_reference.safetensors"));
  const test::SdxlCase* c = nullptr;
  for (const test::SdxlCase& k : cases)
    if (k.batch == 2 && !std::equal(k.time_ids.begin(), k.time_ids.begin() + 6, k.time_ids.begin() + 6)) c = &k;
  ASSERT_NE(c, nullptr) << "no case of 2 images with time ids of their own";
  const auto swapped = [](std::vector<float> v) {
    std::rotate(v.begin(), v.begin() + v.size() / 2, v.end());
    return v;
  };
  auto cpu = make_cpu_backend(0);
  UNetRunner runner(u.config, *u.weights, *cpu, c->batch, c->height, c->width, c->t);
  runner.set_inputs(c->x, {}, c->context, c->text_embeds, swapped(c->time_ids));
  runner.forward();
  EXPECT_GT(test::rel_l2(runner.output(), c->v), 1e-2);
  runner.set_inputs(c->x, {}, c->context, swapped(c->text_embeds), c->time_ids);
  runner.forward();
  EXPECT_GT(test::rel_l2(runner.output(), c->v), 1e-2);
}

json read_json(const std::string& path) { return json::parse(read_config_file(path)); }

// The error of tiny_sdxl's unet/config.json after change, parsed alone.
std::string config_error(const std::function<void(json&)>& change) {
  json j = read_json(test::test_data(kTiny + "/unet/config.json"));
  change(j);
  return error_of([&] { parse_diffusers_unet_config(j.dump(), "unet/config.json", DType::F16); });
}

TEST(TinySdxlUNet, BadConfigsNameTheKey) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "unet/config.json: key 'projection_class_embeddings_input_dim': expected more than 6 x "
                      "addition_time_embed_dim = 48 (the pooled text embedding's width, then the 6 time ids' "
                      "embeddings), got 48",
                      config_error([](json& j) { j["projection_class_embeddings_input_dim"] = 48; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "unet/config.json: key 'projection_class_embeddings_input_dim': expected an integer",
                      config_error([](json& j) { j["projection_class_embeddings_input_dim"] = nullptr; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "unet/config.json: key 'addition_time_embed_dim': expected an integer",
                      config_error([](json& j) { j.erase("addition_time_embed_dim"); }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "unet/config.json: key 'addition_embed_type': an added embedding other than SDXL's is not "
                      "supported by rtvd: expected null or \"text_time\", got string \"text\"",
                      config_error([](json& j) { j["addition_embed_type"] = "text"; }));
  // Without text_time the sizes keep diffusers' default, as before.
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "unet/config.json: key 'addition_time_embed_dim': an added time embedding is not supported by "
                      "rtvd: expected null, got number 8",
                      config_error([](json& j) { j["addition_embed_type"] = nullptr; j["projection_class_embeddings_input_dim"] = nullptr; }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "unet/config.json: key 'projection_class_embeddings_input_dim': a class embedding is not "
                      "supported by rtvd: expected null, got number 80",
                      config_error([](json& j) { j["addition_embed_type"] = nullptr; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'transformer_layers_per_block': expected an integer",
                      config_error([](json& j) { j["transformer_layers_per_block"] = {1, {1, 2}, 2}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'reverse_transformer_layers_per_block': other transformer depths",
                      config_error([](json& j) { j["reverse_transformer_layers_per_block"] = {2, 2, 1}; }));
}

// A projection_class_embeddings_input_dim that passes the config's own check but disagrees with the
// checkpoint (text embeds + 6 x addition_time_embed_dim = 32 + 48): one line naming the tensor and shapes.
TEST(TinySdxlUNet, ProjectionWidthThatDisagreesWithTheWeights) {
  test::DiffusersUNet u = test::load_diffusers_unet(test::test_data(kTiny + "/unet"));
  u.config.projection_class_embeddings_input_dim = 88;
  auto cpu = make_cpu_backend(1);
  const std::string error = error_of([&] { UNetRunner(u.config, *u.weights, *cpu, 1, 8, 8, 0.5f); });
  EXPECT_PRED_FORMAT2(IsSubstring, "add_embedding.linear_1.weight", error);
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

}  // namespace
}  // namespace rtvd
