// Single-file checkpoints (pipeline/model_files/single_file.h) against diffusers:
//   - tests/data/tiny_sd as one file by diffusers' convert_diffusers_to_original_stable_diffusion.py (SD 1.x
//     text layout) and the same with the text encoder in OpenCLIP's layout (export_sd_references.py, rebuilt
//     here byte for byte from tests/data/single_file: pack_sd_refs.py): every tensor equals the diffusers
//     folder's of the same name, bit for bit, and the U-Net and text encoder compute what the folder's do;
//   - the full-size SD 1.5 and SD 2.1 layouts (shape-only files: every parameter of the built-in configs and of
//     the published VAE and CLIP-L / OpenCLIP-H, under the original names): the configs inferred from shapes
//     are the built-in / diffusers ones;
//   - every bad file: one line naming the file and the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "pipeline/backends/backend.h"
#include "pipeline/model_files/clip_text_config.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/model_files/ldm_layout.h"
#include "pipeline/model_files/single_file.h"
#include "pipeline/models/clip_text.h"
#include "pipeline/models/model.h"
#include "pipeline/models/unet.h"
#include "pipeline/samplers/sampler_plan.h"
#include "pipeline/text_encoder.h"
#include "pipeline/unet_runner.h"
#include "support/tensor_files.h"
#include "support/model_configs.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

std::string tiny_sd(const std::string& rel = "") { return test::test_data("tiny_sd") + (rel.empty() ? "" : "/" + rel); }

const std::vector<std::string> kFolderFiles = {"unet/diffusion_pytorch_model.safetensors",
                                               "vae/diffusion_pytorch_model.safetensors", "text_encoder/model.safetensors"};

// export_sd_references.py's NAME.safetensors, rebuilt from its manifest and tiny_sd's weights files.
std::vector<TensorToWrite> rebuilt_tensors(const std::string& name, std::map<std::string, std::string>& metadata) {
  std::vector<std::string> sources;
  for (const std::string& f : kFolderFiles) sources.push_back(tiny_sd(f));
  sources.push_back(test::test_data("single_file/extras.safetensors"));
  return test::packed_file_tensors(test::test_data("single_file/" + name + ".manifest.json"), sources, metadata);
}

std::string rebuilt_file(const std::string& name, const test::TempDir& dir) {
  std::map<std::string, std::string> metadata;
  const std::vector<TensorToWrite> tensors = rebuilt_tensors(name, metadata);
  const std::string path = dir.path(name + ".safetensors");
  write_safetensors(path, tensors, metadata);
  return path;
}

// Every tensor of the set is the folder file's tensor of that name (dtype, shape, bytes), and it has them all.
void expect_same_tensors(const TensorSet& set, const std::string& folder_file) {
  const SafeTensorsFile folder = SafeTensorsFile::open(tiny_sd(folder_file));
  std::set<std::string> want, got;
  for (const TensorView& t : folder.tensors()) want.insert(t.name.starts_with("text_model.") ? t.name.substr(11) : t.name);
  for (const TensorView& t : set.tensors()) {
    got.insert(t.name);
    const TensorView* f = folder.find(t.name);
    if (!f) f = folder.find("text_model." + t.name);
    ASSERT_NE(f, nullptr) << folder_file << ": no tensor " << t.name << " (from " << set.source_name(t.name) << ")";
    EXPECT_EQ(t.dtype, f->dtype) << t.name;
    EXPECT_EQ(t.shape, f->shape) << t.name << " from " << set.source_name(t.name);
    ASSERT_EQ(t.bytes, f->bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, f->data, t.bytes), 0) << t.name << " differs from " << set.source_name(t.name);
  }
  EXPECT_EQ(got, want) << folder_file;
}

class TinySdSingleFile : public ::testing::TestWithParam<const char*> {};

TEST_P(TinySdSingleFile, EveryTensorIsTheDiffusersFoldersBitForBit) {
  test::TempDir dir;
  const std::string path = rebuilt_file(GetParam(), dir);
  const bool open_clip = std::string(GetParam()) == "tiny_sd_openclip";
  const SingleFileCheckpoint c = open_single_file(path, tiny_sd());
  EXPECT_EQ(c.text_encoder_layout, open_clip ? "openclip" : "openai-clip");
  EXPECT_EQ(c.architecture, "configs of " + tiny_sd());
  EXPECT_EQ(c.prediction_type, "");  // the file has no metadata that says
  for (const auto& [component, name] : {std::pair{&c.unet, "unet"}, std::pair{&c.vae, "vae"}, std::pair{&c.text_encoder, "text_encoder"}}) {
    EXPECT_EQ(component->config_label, tiny_sd(cat(name, "/config.json")));
    EXPECT_EQ(component->config_json, read_config_file(tiny_sd(cat(name, "/config.json"))));
  }
  expect_same_tensors(c.unet.tensors, kFolderFiles[0]);
  expect_same_tensors(c.vae.tensors, kFolderFiles[1]);
  expect_same_tensors(c.text_encoder.tensors, kFolderFiles[2]);
  // Renamed views into the file, named in errors by the file's own names.
  EXPECT_EQ(c.unet.tensors.source_name("up_blocks.0.upsamplers.0.conv.weight"), "model.diffusion_model.output_blocks.2.1.conv.weight");
  EXPECT_EQ(c.vae.tensors.source_name("decoder.up_blocks.0.resnets.0.conv1.weight"), "first_stage_model.decoder.up.3.block.0.conv1.weight");
  EXPECT_EQ(c.vae.tensors.source_name("encoder.mid_block.attentions.0.to_q.weight"), "first_stage_model.encoder.mid.attn_1.q.weight");
  if (open_clip)
    EXPECT_EQ(c.text_encoder.tensors.source_name("encoder.layers.1.self_attn.v_proj.weight"),
              "cond_stage_model.model.transformer.resblocks.1.attn.in_proj_weight");
}

// The same weights compute the same: the folder's U-Net and text encoder against the single file's.
TEST_P(TinySdSingleFile, ComputesWhatTheFolderComputes) {
  test::TempDir dir;
  const std::string path = rebuilt_file(GetParam(), dir);
  SingleFileCheckpoint c = open_single_file(path, tiny_sd());
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  auto cpu = make_cpu_backend(1);

  std::vector<int32_t> ids(77);
  for (int32_t& id : ids) id = rng.integer(0, 49407);
  TextEncoder folder_encoder(tiny_sd("text_encoder"), *cpu);
  TextEncoder file_encoder(TextEncoderCheckpoint{parse_clip_text_config(c.text_encoder.config_json, c.text_encoder.config_label),
                                                 std::move(c.text_encoder.tensors)},
                           *cpu);
  EXPECT_EQ(file_encoder.encode(ids, 1), folder_encoder.encode(ids, 1));

  const ModelConfig cfg = parse_diffusers_unet_config(c.unet.config_json, c.unet.config_label, DType::F16);
  WeightStore folder_weights(SafeTensorsFile::open(tiny_sd(kFolderFiles[0])));
  WeightStore file_weights(std::move(c.unet.tensors));
  const int side = cfg.sample_size;
  const std::vector<float> x = rng.normal_vector(size_t(side * side * cfg.in_channels));
  const std::vector<float> context = rng.normal_vector(size_t(cfg.context_length * cfg.cross_attention_dim));
  std::vector<std::vector<float>> outputs;
  for (WeightStore* w : {&folder_weights, &file_weights}) {
    UNetRunner runner(cfg, *w, *cpu, 1, side, side, 0.5f);
    w->check_all_read();
    runner.set_inputs(x, {}, context);
    runner.forward();
    outputs.push_back(runner.output());
  }
  EXPECT_TRUE(test::all_finite(outputs[1]));
  EXPECT_EQ(outputs[1], outputs[0]);
}

INSTANTIATE_TEST_SUITE_P(Refs, TinySdSingleFile, ::testing::Values("tiny_sd_sd1", "tiny_sd_openclip"));

// A --config folder in dir: unet_config and the tiny folder's vae/ and text_encoder/ configs (no scheduler/, as a
// single file brings none).
std::string config_folder(const test::TempDir& dir, const std::string& unet_config) {
  const std::string configs = dir.path("configs");
  for (const char* component : {"unet", "vae", "text_encoder"}) {
    fs::create_directories(configs + "/" + component);
    fs::copy_file(component == std::string("unet") ? unet_config : tiny_sd(cat(component, "/config.json")),
                  configs + "/" + component + "/config.json");
  }
  return configs;
}

// Without a scheduler config (the tiny folder's configs less its scheduler/, as a single file brings none) the
// model runs SD's assumed schedule at leading spacing; --timestep-spacing replaces the spacing, so that one step
// of a distilled model starts at the top of the schedule.
TEST(SingleFileModel, AssumedScheduleAndTimestepSpacing) {
  test::TempDir dir;
  const std::string path = rebuilt_file("tiny_sd_sd1", dir);
  const std::string configs = config_folder(dir, tiny_sd("unet/config.json"));
  ModelOptions o;
  o.path = path;
  o.config = configs;
  o.prediction_type = PredictionType::Epsilon;  // architectures from configs do not say
  const Model assumed = load_model(o);
  ASSERT_TRUE(assumed.scheduler);
  EXPECT_TRUE(assumed.scheduler->assumed);
  EXPECT_EQ(assumed.scheduler->timestep_spacing, TimestepSpacing::Leading);
  EXPECT_EQ(make_sampler_plan(*assumed.scheduler, SamplerKind::Euler, 1, 1.0f).steps.front().timestep, 1.0);

  o.timestep_spacing = TimestepSpacing::Trailing;
  const Model trailing = load_model(o);
  EXPECT_EQ(trailing.scheduler->timestep_spacing, TimestepSpacing::Trailing);
  EXPECT_EQ(make_sampler_plan(*trailing.scheduler, SamplerKind::Euler, 1, 1.0f).steps.front().timestep, 999.0);

  o.config = tiny_sd();  // the folder's own scheduler config: not assumed, and the flag still decides
  const Model own = load_model(o);
  EXPECT_FALSE(own.scheduler->assumed);
  EXPECT_EQ(own.scheduler->timestep_spacing, TimestepSpacing::Trailing);
}

// --config with an SDXL U-Net's config for a file of SD's one text encoder: one line naming both.
TEST(SingleFileModel, AnSdxlUNetConfigForSdTensorsIsRefused) {
  test::TempDir dir;
  const std::string path = rebuilt_file("tiny_sd_sd1", dir);
  const std::string configs = config_folder(dir, test::test_data("tiny_sdxl/unet/config.json"));
  ModelOptions o;
  o.path = path;
  o.config = configs;
  o.prediction_type = PredictionType::Epsilon;
  EXPECT_EQ(test::error_of([&] { load_model(o); }),
            cat(configs, "/unet/config.json: an SDXL U-Net (addition_embed_type \"text_time\"), but ", path,
                " holds one text encoder (SDXL's are conditioner.embedders.0.transformer.* and conditioner.embedders.1.model.*)"));
}

// ---- the full-size layouts, from the parameter lists of the architectures

// diffusers' AutoencoderKL parameters (block_out_channels, layers_per_block, latent channels; RGB).
std::vector<TensorSpec> vae_parameters(const std::vector<int64_t>& ch, int layers, int64_t latent) {
  std::vector<TensorSpec> out;
  const auto with_bias = [&](const std::string& name, std::vector<int64_t> shape) {
    out.push_back({name + ".bias", DType::F16, {shape[0]}});
    out.push_back({name + ".weight", DType::F16, std::move(shape)});
  };
  const auto norm = [&](const std::string& name, int64_t c) { with_bias(name, {c}); };
  const auto resnet = [&](const std::string& p, int64_t in, int64_t c) {
    norm(p + ".norm1", in);
    with_bias(p + ".conv1", {c, in, 3, 3});
    norm(p + ".norm2", c);
    with_bias(p + ".conv2", {c, c, 3, 3});
    if (in != c) with_bias(p + ".conv_shortcut", {c, in, 1, 1});
  };
  const auto mid = [&](const std::string& p, int64_t c) {
    resnet(p + ".mid_block.resnets.0", c, c);
    norm(p + ".mid_block.attentions.0.group_norm", c);
    for (const char* proj : {"to_q", "to_k", "to_v", "to_out.0"}) with_bias(cat(p, ".mid_block.attentions.0.", proj), {c, c});
    resnet(p + ".mid_block.resnets.1", c, c);
  };
  const int L = int(ch.size());
  with_bias("encoder.conv_in", {ch[0], 3, 3, 3});
  int64_t c = ch[0];
  for (int i = 0; i < L; ++i) {
    for (int j = 0; j < layers; ++j) resnet(cat("encoder.down_blocks.", i, ".resnets.", j), std::exchange(c, ch[size_t(i)]), ch[size_t(i)]);
    if (i < L - 1) with_bias(cat("encoder.down_blocks.", i, ".downsamplers.0.conv"), {c, c, 3, 3});
  }
  mid("encoder", c);
  norm("encoder.conv_norm_out", c);
  with_bias("encoder.conv_out", {2 * latent, c, 3, 3});
  with_bias("quant_conv", {2 * latent, 2 * latent, 1, 1});
  with_bias("post_quant_conv", {latent, latent, 1, 1});
  with_bias("decoder.conv_in", {ch.back(), latent, 3, 3});
  mid("decoder", ch.back());
  c = ch.back();
  for (int i = 0; i < L; ++i) {
    const int64_t co = ch[size_t(L - 1 - i)];
    for (int j = 0; j <= layers; ++j) resnet(cat("decoder.up_blocks.", i, ".resnets.", j), std::exchange(c, co), co);
    if (i < L - 1) with_bias(cat("decoder.up_blocks.", i, ".upsamplers.0.conv"), {c, c, 3, 3});
  }
  norm("decoder.conv_norm_out", c);
  with_bias("decoder.conv_out", {3, c, 3, 3});
  return out;
}

// A diffusers VAE name in the original layout, as convert_diffusers_to_original_stable_diffusion.py writes it
// (with the level count of the model rather than its hard-coded 4): the projections as 1x1 convs.
TensorSpec original_vae_name(TensorSpec s, int levels) {
  std::string& n = s.name;
  const auto replace = [&](const std::string& from, const std::string& to) {
    if (const size_t at = n.find(from); at != std::string::npos) n.replace(at, from.size(), to);
  };
  for (int i = 0; i < levels; ++i) {
    replace(cat("encoder.down_blocks.", i, ".resnets."), cat("encoder.down.", i, ".block."));
    replace(cat("encoder.down_blocks.", i, ".downsamplers.0."), cat("encoder.down.", i, ".downsample."));
    replace(cat("decoder.up_blocks.", i, ".resnets."), cat("decoder.up.", levels - 1 - i, ".block."));
    replace(cat("decoder.up_blocks.", i, ".upsamplers.0."), cat("decoder.up.", levels - 1 - i, ".upsample."));
  }
  for (int i = 0; i < 2; ++i) replace(cat("mid_block.resnets.", i, "."), cat("mid.block_", i + 1, "."));
  replace("mid_block.attentions.0.", "mid.attn_1.");
  replace("group_norm", "norm");
  replace("to_q", "q");
  replace("to_k", "k");
  replace("to_v", "v");
  replace("to_out.0", "proj_out");
  replace("conv_shortcut", "nin_shortcut");
  replace("conv_norm_out", "norm_out");
  if (n.find("mid.attn_1.") != std::string::npos && s.shape.size() == 2) s.shape.insert(s.shape.end(), {1, 1});
  s.name = "first_stage_model." + n;
  return s;
}

// OpenCLIP's text tower for a CLIPTextModel config, with the extra last block SD 2.x leaves unused.
std::vector<TensorSpec> open_clip_parameters(const ClipTextConfig& c) {
  const std::string p = "cond_stage_model.model.";
  const int64_t w = c.hidden_size;
  std::vector<TensorSpec> out = {{p + "token_embedding.weight", DType::F16, {c.vocab_size, w}},
                                 {p + "positional_embedding", DType::F16, {c.max_position_embeddings, w}},
                                 {p + "ln_final.weight", DType::F16, {w}},
                                 {p + "ln_final.bias", DType::F16, {w}},
                                 {p + "text_projection", DType::F16, {w, w}},
                                 {p + "logit_scale", DType::F16, {}}};
  for (int i = 0; i <= c.num_hidden_layers; ++i) {
    const std::string b = cat(p, "transformer.resblocks.", i, ".");
    out.push_back({b + "attn.in_proj_weight", DType::F16, {3 * w, w}});
    out.push_back({b + "attn.in_proj_bias", DType::F16, {3 * w}});
    for (const auto& [m, shape] : {std::pair{"attn.out_proj", std::vector<int64_t>{w, w}},
                                   std::pair{"mlp.c_fc", std::vector<int64_t>{c.intermediate_size, w}},
                                   std::pair{"mlp.c_proj", std::vector<int64_t>{w, c.intermediate_size}}}) {
      out.push_back({b + m + ".weight", DType::F16, shape});
      out.push_back({b + m + ".bias", DType::F16, {shape[0]}});
    }
    for (const char* ln : {"ln_1", "ln_2"})
      for (const char* wb : {".weight", ".bias"}) out.push_back({b + ln + wb, DType::F16, {w}});
  }
  return out;
}

ClipTextConfig clip_l() {  // openai/clip-vit-large-patch14's text model, SD 1.x's text encoder
  return ClipTextConfig{49408, 768, 3072, 12, 12, 77, ClipTextConfig::HiddenAct::QuickGelu, 1e-5f};
}
ClipTextConfig open_clip_h() {  // stabilityai/stable-diffusion-2-1's text_encoder (OpenCLIP ViT-H, 23 of 24 blocks)
  return ClipTextConfig{49408, 1024, 4096, 23, 16, 77, ClipTextConfig::HiddenAct::Gelu, 1e-5f};
}

// The U-Net of the config and the SD VAE (SDXL's has its shapes), under the original names.
std::vector<TensorSpec> original_unet_and_vae(const ModelConfig& unet) {
  std::vector<TensorSpec> specs;
  std::vector<std::string> unet_names;
  const std::vector<TensorSpec> unet_specs = unet_parameters(unet);
  for (const TensorSpec& s : unet_specs) unet_names.push_back(s.name);
  const std::map<std::string, std::string> original = ldm_unet_names(unet_names);
  for (const TensorSpec& s : unet_specs) specs.push_back({"model.diffusion_model." + original.at(s.name), s.dtype, s.shape});
  for (const TensorSpec& s : vae_parameters({128, 256, 512, 512}, 2, 4)) specs.push_back(original_vae_name(s, 4));
  return specs;
}

// A full-size single file's tensors: the U-Net of the built-in config, the SD VAE and a text encoder, under
// the original names, with what LatentDiffusion saved beside them (its schedule, the EMA copy).
std::vector<TensorSpec> full_size_specs(const ModelConfig& unet, const ClipTextConfig& text, bool open_clip) {
  std::vector<TensorSpec> specs = original_unet_and_vae(unet);
  if (open_clip) {
    for (TensorSpec& s : open_clip_parameters(text)) specs.push_back(std::move(s));
  } else {
    for (TensorSpec s : clip_text_parameters(text, "text_model.", DType::F16)) {
      s.name = "cond_stage_model.transformer." + s.name;
      specs.push_back(std::move(s));
    }
    specs.push_back({"cond_stage_model.transformer.text_model.embeddings.position_ids", DType::I64, {1, 77}});
  }
  for (const char* buffer : {"betas", "alphas_cumprod", "alphas_cumprod_prev", "sqrt_alphas_cumprod", "posterior_variance"})
    specs.push_back({buffer, DType::F32, {1000}});
  specs.push_back({"model_ema.decay", DType::F32, {}});
  specs.push_back({"model_ema.diffusion_modelinput_blocks00weight", DType::F32, {320, 4, 3, 3}});
  return specs;
}

void expect_names(const TensorSet& set, const std::vector<TensorSpec>& want, const char* what) {
  std::map<std::string, std::vector<int64_t>> got, expected;
  for (const TensorView& t : set.tensors()) got[t.name] = t.shape;
  for (const TensorSpec& s : want) expected[s.name] = s.shape;
  EXPECT_EQ(got, expected) << what;
}


void expect_same_text_config(const ClipTextConfig& a, const ClipTextConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  EXPECT_EQ(a.layer_norm_eps, b.layer_norm_eps);
}

// diffusers' vae/config.json of stable-diffusion-v1-5 and stable-diffusion-2-1 (the same VAE), but for the
// keys rtvd does not use (force_upcast, latents_mean/std, shift_factor) and sample_size (512 and 768).
json sd_vae_config(int sample_size) {
  return {{"_class_name", "AutoencoderKL"},
          {"act_fn", "silu"},
          {"block_out_channels", {128, 256, 512, 512}},
          {"down_block_types", std::vector<std::string>(4, "DownEncoderBlock2D")},
          {"in_channels", 3},
          {"latent_channels", 4},
          {"layers_per_block", 2},
          {"norm_num_groups", 32},
          {"out_channels", 3},
          {"sample_size", sample_size},
          {"scaling_factor", 0.18215},
          {"up_block_types", std::vector<std::string>(4, "UpDecoderBlock2D")},
          {"mid_block_add_attention", true},
          {"use_quant_conv", true},
          {"use_post_quant_conv", true}};
}

TEST(FullSizeSingleFile, Sd15ShapesGiveTheBuiltinConfigs) {
  const ModelConfig sd15 = builtin_model_config("sd15");
  const test::ShapeOnlyFile file(full_size_specs(sd15, clip_l(), false), {});
  const SingleFileCheckpoint c = read_single_file(file.file("sd15.safetensors"));
  EXPECT_EQ(c.architecture, "SD 1.x");
  EXPECT_EQ(c.text_encoder_layout, "openai-clip");
  EXPECT_EQ(c.unet.config_label, "sd15.safetensors (SD 1.x, inferred from its shapes)");
  test::expect_same_architecture(parse_diffusers_unet_config(c.unet.config_json, c.unet.config_label, DType::F16), sd15);
  EXPECT_EQ(json::parse(c.vae.config_json), sd_vae_config(512));
  expect_same_text_config(parse_clip_text_config(c.text_encoder.config_json, c.text_encoder.config_label), clip_l());
  expect_names(c.unet.tensors, unet_parameters(sd15), "U-Net");
  expect_names(c.vae.tensors, vae_parameters({128, 256, 512, 512}, 2, 4), "VAE");
  expect_names(c.text_encoder.tensors, clip_text_parameters(clip_l(), "", DType::F16), "text encoder");
  // SD's own names for some of them (diffusers' CHECKPOINT_KEY_NAMES["v1"] and its converter's tables).
  for (const auto& [diffusers, original] : std::map<std::string, std::string>{
           {"up_blocks.3.resnets.2.conv_shortcut.weight", "output_blocks.11.0.skip_connection.weight"},
           {"up_blocks.0.upsamplers.0.conv.weight", "output_blocks.2.1.conv.weight"},
           {"up_blocks.1.upsamplers.0.conv.bias", "output_blocks.5.2.conv.bias"},
           {"down_blocks.2.downsamplers.0.conv.weight", "input_blocks.9.0.op.weight"},
           {"down_blocks.1.attentions.1.transformer_blocks.0.attn2.to_k.weight", "input_blocks.5.1.transformer_blocks.0.attn2.to_k.weight"},
           {"mid_block.resnets.1.time_emb_proj.weight", "middle_block.2.emb_layers.1.weight"},
           {"time_embedding.linear_2.weight", "time_embed.2.weight"}})
    EXPECT_EQ(c.unet.tensors.source_name(diffusers), "model.diffusion_model." + original);
}

TEST(FullSizeSingleFile, Sd21ShapesGiveTheBuiltinConfigs) {
  const ModelConfig sd21 = builtin_model_config("sd21");
  const test::ShapeOnlyFile file(full_size_specs(sd21, open_clip_h(), true), {});
  const SingleFileCheckpoint c = read_single_file(file.file("sd21.safetensors"));
  EXPECT_EQ(c.architecture, "SD 2.x");
  EXPECT_EQ(c.text_encoder_layout, "openclip");
  test::expect_same_architecture(parse_diffusers_unet_config(c.unet.config_json, c.unet.config_label, DType::F16), sd21);
  EXPECT_EQ(json::parse(c.unet.config_json).at("attention_head_dim"), json({5, 10, 20, 20}));  // diffusers' own
  EXPECT_EQ(json::parse(c.vae.config_json), sd_vae_config(512));
  expect_same_text_config(parse_clip_text_config(c.text_encoder.config_json, c.text_encoder.config_label), open_clip_h());
  expect_names(c.unet.tensors, unet_parameters(sd21), "U-Net");
  expect_names(c.text_encoder.tensors, clip_text_parameters(open_clip_h(), "", DType::F16), "text encoder");
  EXPECT_EQ(c.text_encoder.tensors.source_name("encoder.layers.22.self_attn.k_proj.bias"),
            "cond_stage_model.model.transformer.resblocks.22.attn.in_proj_bias");
}

// The prediction type from the metadata keys published files carry; SD 2.x at v is the 768 model.

ClipTextConfig open_clip_big_g() {  // SDXL's text_encoder_2 (OpenCLIP ViT-bigG, all 32 blocks, projection 1280)
  ClipTextConfig c{49408, 1280, 5120, 32, 20, 77, ClipTextConfig::HiddenAct::Gelu, 1e-5f};
  c.projection_dim = 1280;
  return c;
}

// A full-size SDXL single file as published: model.diffusion_model.* with label_emb, the SD VAE's layout,
// conditioner.embedders.0.transformer.text_model.* (CLIP-L) and conditioner.embedders.1.model.* (bigG).
std::vector<TensorSpec> sdxl_specs(const ModelConfig& unet) {
  std::vector<TensorSpec> specs = original_unet_and_vae(unet);
  for (TensorSpec s : clip_text_parameters(clip_l(), "text_model.", DType::F16)) {
    s.name = "conditioner.embedders.0.transformer." + s.name;
    specs.push_back(std::move(s));
  }
  ClipTextConfig blocks = open_clip_big_g();
  --blocks.num_hidden_layers;  // open_clip_parameters adds the block SD 2.x leaves unused: 32 in all
  for (TensorSpec s : open_clip_parameters(blocks)) {
    s.name = "conditioner.embedders.1.model." + s.name.substr(std::string("cond_stage_model.model.").size());
    if (s.name.ends_with("text_projection")) s.shape = {1280, 1280};  // (width, projection)
    specs.push_back(std::move(s));
  }
  return specs;
}

// diffusers' single-file conversion of SDXL (single_file_utils.py, the xl_base config it fetches): the U-Net's
// transformer depth [1, 2, 10], heads of 64, the added embedding of 1280 + 6 x 256; the VAE's 0.13025 with
// force_upcast; the second encoder with its projection, every block kept; the image 1024.
TEST(FullSizeSingleFile, SdxlShapesGiveThePublishedConfigs) {
  const ModelConfig sdxl = parse_diffusers_unet_config(test::kSdxlBaseUNetConfig, "sdxl", DType::F16);
  const test::ShapeOnlyFile file(sdxl_specs(sdxl), {});
  const SingleFileCheckpoint c = read_single_file(file.file("sdxl.safetensors"));
  EXPECT_EQ(c.architecture, "SDXL");
  EXPECT_EQ(c.text_encoder_layout, "sdxl");
  test::expect_same_architecture(parse_diffusers_unet_config(c.unet.config_json, c.unet.config_label, DType::F16), sdxl);
  const json unet = json::parse(c.unet.config_json);
  EXPECT_EQ(unet.at("transformer_layers_per_block"), json({1, 2, 10}));
  EXPECT_EQ(unet.at("attention_head_dim"), json({5, 10, 20}));
  EXPECT_EQ(unet.at("addition_time_embed_dim"), 256);
  EXPECT_EQ(unet.at("sample_size"), 128);
  json vae = sd_vae_config(1024);
  vae["scaling_factor"] = 0.13025;
  vae["force_upcast"] = true;
  EXPECT_EQ(json::parse(c.vae.config_json), vae);
  expect_same_text_config(parse_clip_text_config(c.text_encoder.config_json, c.text_encoder.config_label), clip_l());
  const ClipTextConfig second = parse_clip_text_config(c.text_encoder_2.config_json, c.text_encoder_2.config_label);
  expect_same_text_config(second, open_clip_big_g());
  EXPECT_EQ(second.projection_dim, 1280);
  expect_names(c.unet.tensors, unet_parameters(sdxl), "U-Net");
  expect_names(c.text_encoder.tensors, clip_text_parameters(clip_l(), "", DType::F16), "text encoder");
  std::vector<TensorSpec> with_projection = clip_text_parameters(open_clip_big_g(), "", DType::F16);
  with_projection.push_back({"text_projection.weight", DType::F16, {1280, 1280}});
  expect_names(c.text_encoder_2.tensors, with_projection, "text encoder 2");
  // SDXL's own names for some of them (diffusers' DIFFUSERS_TO_LDM_MAPPING["sdxl"] and CHECKPOINT_KEY_NAMES).
  for (const auto& [diffusers, original] : std::map<std::string, std::string>{
           {"add_embedding.linear_1.weight", "label_emb.0.0.weight"},
           {"add_embedding.linear_2.bias", "label_emb.0.2.bias"},
           {"up_blocks.0.upsamplers.0.conv.weight", "output_blocks.2.2.conv.weight"},
           {"up_blocks.1.upsamplers.0.conv.weight", "output_blocks.5.2.conv.weight"},
           {"down_blocks.2.attentions.1.transformer_blocks.9.attn1.to_q.weight",
            "input_blocks.8.1.transformer_blocks.9.attn1.to_q.weight"},
           {"down_blocks.1.downsamplers.0.conv.weight", "input_blocks.6.0.op.weight"}})
    EXPECT_EQ(c.unet.tensors.source_name(diffusers), "model.diffusion_model." + original);
  EXPECT_EQ(c.text_encoder_2.tensors.source_name("encoder.layers.31.self_attn.v_proj.weight"),
            "conditioner.embedders.1.model.transformer.resblocks.31.attn.in_proj_weight");
}

// An SDXL file without one of its encoders, with SD's beside SDXL's, or the refiner's: one line each.
TEST(FullSizeSingleFile, SdxlFilesRefusedByName) {
  const ModelConfig sdxl = parse_diffusers_unet_config(test::kSdxlBaseUNetConfig, "sdxl", DType::F16);
  const std::vector<TensorSpec> specs = sdxl_specs(sdxl);
  const auto error = [&](const std::function<void(std::vector<TensorSpec>&)>& edit) {
    std::vector<TensorSpec> edited = specs;
    edit(edited);
    const test::ShapeOnlyFile file(edited, {});
    return error_of([&] { read_single_file(file.file("sdxl.safetensors")); });
  };
  const auto without = [](const std::string& prefix) {
    return [prefix](std::vector<TensorSpec>& t) { std::erase_if(t, [&](const TensorSpec& s) { return s.name.starts_with(prefix); }); };
  };
  EXPECT_EQ(error(without("conditioner.embedders.1.")),
            "sdxl.safetensors: SDXL's second text encoder is missing (no tensor conditioner.embedders.1.model.*): an SDXL "
            "checkpoint has both");
  EXPECT_EQ(error(without("conditioner.embedders.0.")),
            "sdxl.safetensors: SDXL's first text encoder is missing (no tensor conditioner.embedders.0.transformer.*): an "
            "SDXL checkpoint has both");
  EXPECT_EQ(error([](auto& t) { t.push_back({"cond_stage_model.transformer.text_model.final_layer_norm.bias", DType::F16, {768}}); }),
            "sdxl.safetensors: text encoders of SD (cond_stage_model.transformer.*) and of SDXL "
            "(conditioner.embedders.0.transformer.*) in one file");
  EXPECT_EQ(error(without("model.diffusion_model.label_emb.")),
            "sdxl.safetensors: SDXL's text encoders but no added embedding in the U-Net (no tensor "
            "model.diffusion_model.label_emb.0.0.weight)");
  EXPECT_EQ(error([](std::vector<TensorSpec>& t) {
              std::erase_if(t, [](const TensorSpec& s) { return s.name.starts_with("conditioner."); });
              t.push_back({"conditioner.embedders.0.model.text_projection", DType::F16, {1280, 1280}});
            }),
            "sdxl.safetensors: tensor 'conditioner.embedders.0.model.text_projection': an SDXL refiner checkpoint (its "
            "one text encoder, OpenCLIP bigG, as conditioner.embedders.0, and the aesthetic score in its U-Net's added "
            "embedding), which rtvd does not run");
  std::vector<TensorSpec> sd15 = full_size_specs(builtin_model_config("sd15"), clip_l(), false);
  sd15.push_back({"model.diffusion_model.label_emb.0.0.weight", DType::F16, {1280, 2816}});
  const test::ShapeOnlyFile file(sd15, {});
  EXPECT_EQ(error_of([&] { read_single_file(file.file("sd15.safetensors")); }),
            "sd15.safetensors: an added embedding (model.diffusion_model.label_emb.0.0.weight) in the U-Net, which only "
            "SDXL's takes, but SD's text encoder (cond_stage_model.transformer.*) rather than SDXL's two "
            "(conditioner.embedders.0.transformer.*, conditioner.embedders.1.model.*)");
}

TEST(FullSizeSingleFile, PredictionTypeAndImageSizeFromMetadata) {
  const std::vector<TensorSpec> sd21 = full_size_specs(builtin_model_config("sd21"), open_clip_h(), true);
  struct Case {
    std::map<std::string, std::string> metadata;
    bool v_pred_marker;
    const char *type, *source;
    int image;
  };
  const Case cases[] = {
      {{}, false, "", "", 512},
      {{{"modelspec.prediction_type", "v"}}, false, "v_prediction", "modelspec.prediction_type", 768},
      {{{"modelspec.prediction_type", "epsilon"}, {"modelspec.resolution", "1024x1024"}}, false, "epsilon",
       "modelspec.prediction_type", 1024},
      {{{"modelspec.predict_key", "v"}}, false, "v_prediction", "modelspec.predict_key", 768},
      {{{"modelspec.architecture", "stable-diffusion-v2-768-v"}}, false, "v_prediction", "modelspec.architecture", 768},
      {{{"modelspec.architecture", "stable-diffusion-v2-512"}}, false, "epsilon", "modelspec.architecture", 512},
      {{{"ss_v_parameterization", "True"}, {"modelspec.resolution", "768x512"}}, false, "v_prediction",
       "ss_v_parameterization", 768},
      {{{"ss_v_parameterization", "False"}}, false, "epsilon", "ss_v_parameterization", 512},
      {{}, true, "v_prediction", "tensor 'v_pred'", 768},
  };
  for (const Case& c : cases) {
    std::vector<TensorSpec> specs = sd21;
    if (c.v_pred_marker) specs.push_back({"v_pred", DType::F32, {0}});
    const test::ShapeOnlyFile file(specs, c.metadata);
    const SingleFileCheckpoint got = read_single_file(file.file("sd21.safetensors"));
    SCOPED_TRACE(c.source);
    EXPECT_EQ(got.prediction_type, c.type);
    EXPECT_EQ(got.prediction_source, c.source);
    EXPECT_EQ(json::parse(got.unet.config_json).at("sample_size"), c.image / 8);
    EXPECT_EQ(json::parse(got.vae.config_json).at("sample_size"), c.image);
  }
  const auto error = [&](const std::map<std::string, std::string>& metadata) {
    const test::ShapeOnlyFile file(sd21, metadata);
    return error_of([&] { read_single_file(file.file("sd21.safetensors")); });
  };
  EXPECT_EQ(error({{"modelspec.prediction_type", "epsilon"}, {"ss_v_parameterization", "True"}}),
            "sd21.safetensors: modelspec.prediction_type says epsilon but ss_v_parameterization says v_prediction");
  EXPECT_EQ(error({{"modelspec.prediction_type", "flow"}}),
            "sd21.safetensors: metadata 'modelspec.prediction_type' is 'flow', expected epsilon or v");
  EXPECT_EQ(error({{"ss_v_parameterization", "yes"}}),
            "sd21.safetensors: metadata 'ss_v_parameterization' is 'yes', expected True or False");
  EXPECT_EQ(error({{"modelspec.resolution", "big"}}),
            "sd21.safetensors: metadata 'modelspec.resolution' is 'big', expected WIDTHxHEIGHT in multiples of 8");
}

// ---- bad files

// The tiny SD 1.x file, changed by edit, written as NAME in dir.
std::string edited_file(const test::TempDir& dir, const std::string& name,
                        const std::function<void(std::vector<TensorToWrite>&)>& edit) {
  std::map<std::string, std::string> metadata;
  std::vector<TensorToWrite> tensors = rebuilt_tensors("tiny_sd_sd1", metadata);
  edit(tensors);
  const std::string path = dir.path(name);
  write_safetensors(path, tensors, metadata);
  return path;
}

void erase_prefix(std::vector<TensorToWrite>& t, const std::string& prefix) {
  std::erase_if(t, [&](const TensorToWrite& x) { return x.name.starts_with(prefix); });
}

TensorToWrite& tensor_named(std::vector<TensorToWrite>& t, const std::string& name) {
  for (TensorToWrite& x : t)
    if (x.name == name) return x;
  fail("no tensor ", name);
}

TEST(SingleFileErrors, NameTheFileAndTheTensor) {
  test::TempDir dir;
  const std::string folder = tiny_sd();
  const auto error = [&](const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    const std::string path = edited_file(dir, "bad.safetensors", edit);
    return error_of([&] { open_single_file(path, folder); });
  };
  const std::string file = dir.path("bad.safetensors");
  EXPECT_EQ(error([](auto& t) { erase_prefix(t, "first_stage_model."); }),
            file + ": no VAE (no tensor first_stage_model.*): not a whole Stable Diffusion checkpoint");
  EXPECT_EQ(error([](auto& t) { erase_prefix(t, "model.diffusion_model."); }),
            file + ": no U-Net (no tensor model.diffusion_model.*): not a whole Stable Diffusion checkpoint");
  EXPECT_EQ(error([](auto& t) { erase_prefix(t, "cond_stage_model."); }),
            file + ": no text encoder (no tensor cond_stage_model.transformer.* or cond_stage_model.model.*)");
  EXPECT_EQ(error([](auto& t) { t.push_back({"cond_stage_model.model.ln_final.weight", DType::F16, {32}, std::vector<uint8_t>(64)}); }),
            file + ": two text encoders (tensors cond_stage_model.transformer.* and cond_stage_model.model.*)");
  EXPECT_EQ(error([](auto& t) { t.push_back({"lora_unet_x.alpha", DType::F32, {}, std::vector<uint8_t>(4)}); }),
            file + ": tensor 'lora_unet_x.alpha': not part of a Stable Diffusion checkpoint's U-Net (model.diffusion_model.), "
                   "VAE (first_stage_model.) or text encoders (cond_stage_model.transformer., cond_stage_model.model.; SDXL's "
                   "conditioner.embedders.0.transformer., conditioner.embedders.1.model.)");
  EXPECT_EQ(error([](auto& t) { tensor_named(t, "model.diffusion_model.input_blocks.4.0.in_layers.2.weight").name =
                                    "model.diffusion_model.input_blocks.4.0.in_layers.1.weight"; }),
            file + ": tensor 'model.diffusion_model.input_blocks.4.0.in_layers.1.weight': not a ResNet's (in_layers, "
                   "emb_layers, out_layers, skip_connection)");
  EXPECT_EQ(error([](auto& t) { tensor_named(t, "model.diffusion_model.middle_block.1.proj_in.weight").name =
                                    "model.diffusion_model.middle_block.1.proj_in2.weight"; }),
            file + ": tensor 'model.diffusion_model.middle_block.1.proj_in2.weight': not a spatial transformer's (norm, "
                   "proj_in, transformer_blocks, proj_out)");
  EXPECT_EQ(error([](auto& t) { tensor_named(t, "model.diffusion_model.out.2.bias").name = "model.diffusion_model.out.3.bias"; }),
            file + ": tensor 'model.diffusion_model.out.3.bias': not a tensor of the original U-Net layout (time_embed, "
                   "label_emb, input_blocks, middle_block, output_blocks, out)");
  EXPECT_EQ(error([](auto& t) { tensor_named(t, "first_stage_model.encoder.down.1.block.0.norm2.bias").name =
                                    "first_stage_model.encoder.down.1.block.0.norm3.bias"; }),
            file + ": tensor 'first_stage_model.encoder.down.1.block.0.norm3.bias': not a ResNet's (norm1, conv1, norm2, "
                   "conv2, nin_shortcut)");
  EXPECT_EQ(error([](auto& t) { tensor_named(t, "first_stage_model.quant_conv.bias").name = "first_stage_model.quant.bias"; }),
            file + ": tensor 'first_stage_model.quant.bias': not a tensor of the original VAE layout (encoder, decoder, "
                   "quant_conv, post_quant_conv)");
  EXPECT_EQ(error([](auto& t) { tensor_named(t, "cond_stage_model.transformer.text_model.final_layer_norm.bias").name =
                                    "cond_stage_model.transformer.text_model.final_norm.bias"; }),
            file + ": tensor 'cond_stage_model.transformer.text_model.final_norm.bias': not a parameter of transformers' "
                   "CLIPTextModel (embeddings, encoder.layers, final_layer_norm)");

  // No config: the tiny U-Net's shapes fit no known architecture.
  const std::string good = edited_file(dir, "tiny.safetensors", [](auto&) {});
  EXPECT_EQ(error_of([&] { open_single_file(good); }),
            good + ": tensor 'model.diffusion_model.middle_block.1.transformer_blocks.0.attn2.to_k.weight' "
                   "(mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight): cross-attention width 32 fits no known "
                   "architecture (SD 1.x: 768, with 8 heads; SD 2.x: 1024, SDXL: 2048, with heads of 64), and the heads cannot be "
                   "read off shapes: give a diffusers folder whose unet/config.json describes this U-Net");
  // A truncated file: the header promises data that is not there.
  const std::string truncated = dir.path("truncated.safetensors");
  fs::copy_file(good, truncated);
  fs::resize_file(truncated, fs::file_size(truncated) - 1000);
  const std::string message = error_of([&] { open_single_file(truncated, folder); });
  EXPECT_TRUE(message.starts_with(truncated + ": tensor '")) << message;
  EXPECT_NE(message.find("reach past the data section of"), std::string::npos) << message;
}

TEST(SingleFileErrors, OpenClipBlocksAndWidths) {
  const ClipTextConfig h = open_clip_h();
  const auto error = [&](std::vector<TensorSpec> specs) {
    const test::ShapeOnlyFile file(specs, {});
    return error_of([&] { read_single_file(file.file("sd21.safetensors")); });
  };
  std::vector<TensorSpec> specs = full_size_specs(builtin_model_config("sd21"), h, true);
  for (TensorSpec& s : specs)
    if (s.name == "cond_stage_model.model.transformer.resblocks.3.attn.in_proj_weight") s.shape = {3 * 1024 + 1, 1024};
  EXPECT_EQ(error(specs), "sd21.safetensors: tensor 'cond_stage_model.model.transformer.resblocks.3.attn.in_proj_weight': "
                          "expected (3072, 1024) (q, k and v of width 1024, the token embedding's), got (3073, 1024)");
  specs = full_size_specs(builtin_model_config("sd21"), h, true);
  specs.push_back({"cond_stage_model.model.transformer.resblocks.5.attn.k_proj.weight", DType::F16, {1024, 1024}});
  EXPECT_EQ(error(specs), "sd21.safetensors: tensor 'cond_stage_model.model.transformer.resblocks.5.attn.k_proj.weight': "
                          "not a parameter of an OpenCLIP block (ln_1, attn.in_proj_weight, attn.in_proj_bias, "
                          "attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj)");
  // SD 1.5's U-Net attends to 768 wide context: OpenCLIP-H's 1024 do not fit it.
  EXPECT_EQ(error(full_size_specs(builtin_model_config("sd15"), h, true)),
            "sd21.safetensors: the U-Net attends to a context of width 768 ('model.diffusion_model.middle_block.1."
            "transformer_blocks.0.attn2.to_k.weight' (mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight)) "
            "but the text encoder's is 1024 ('cond_stage_model.model.token_embedding.weight' "
            "(embeddings.token_embedding.weight))");
}

// Pickles are refused by name before a byte is read, and by their signature under another name.
TEST(SingleFileErrors, PicklesAreRefused) {
  test::TempDir dir;
  const std::string refusal = ": a pickle checkpoint, which rtvd never unpickles (loading one can run code from the file): "
                              "convert it to .safetensors where you trust it, e.g. with torch.load(..., weights_only=True) "
                              "and safetensors.torch.save_file, or diffusers' scripts/convert_original_stable_diffusion_to_diffusers.py";
  for (const char* name : {"v1-5-pruned.ckpt", "model.PT", "unet.pth", "pytorch_model.bin", "never_written.ckpt"}) {
    const std::string path = dir.path(name);
    if (std::string(name) != "never_written.ckpt") std::ofstream(path) << "\x80\x02}q\x00.";
    EXPECT_EQ(error_of([&] { open_single_file(path); }), path + refusal);
  }
  const std::string zip = dir.path("renamed.safetensors");
  std::ofstream(zip, std::ios::binary) << std::string("PK\x03\x04\x14\x00\x00\x00\x08\x00" "archive/data.pkl", 26);
  EXPECT_EQ(error_of([&] { open_single_file(zip); }), zip + refusal);
  EXPECT_TRUE(is_single_file_checkpoint(zip));
  EXPECT_FALSE(is_single_file_checkpoint(dir.dir().string()));
  EXPECT_FALSE(is_single_file_checkpoint(dir.path("missing.safetensors")));
}

}  // namespace
}  // namespace rtvd
