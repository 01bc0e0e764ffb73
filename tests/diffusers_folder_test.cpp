// diffusers folders: tests/data/tiny_sd (written by diffusers' own save_pretrained, tools/reference/
// export_tiny_sd.py) loads, maps and runs, every tensor of its U-Net used; the published SD 1.5 and SD 2.1
// unet/config.json map onto the built-in sd15 and sd21 configs; and each refusal names the file and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "pipeline/backends/backend.h"
#include "pipeline/model_files/diffusers_folder.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/models/model.h"
#include "pipeline/unet_runner.h"
#include "support/model_configs.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using testing::IsSubstring;

// runwayml/stable-diffusion-v1-5, unet/config.json as published.
constexpr const char* kSd15 = R"({
  "_class_name": "UNet2DConditionModel",
  "_diffusers_version": "0.6.0",
  "act_fn": "silu",
  "attention_head_dim": 8,
  "block_out_channels": [320, 640, 1280, 1280],
  "center_input_sample": false,
  "cross_attention_dim": 768,
  "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
  "downsample_padding": 1,
  "flip_sin_to_cos": true,
  "freq_shift": 0,
  "in_channels": 4,
  "layers_per_block": 2,
  "mid_block_scale_factor": 1,
  "norm_eps": 1e-05,
  "norm_num_groups": 32,
  "out_channels": 4,
  "sample_size": 64,
  "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"]
})";

// stabilityai/stable-diffusion-2-1-base, unet/config.json as published: the legacy attention_head_dim is a
// head count per level.
constexpr const char* kSd21Base = R"({
  "_class_name": "UNet2DConditionModel",
  "_diffusers_version": "0.10.0.dev0",
  "act_fn": "silu",
  "attention_head_dim": [5, 10, 20, 20],
  "block_out_channels": [320, 640, 1280, 1280],
  "center_input_sample": false,
  "cross_attention_dim": 1024,
  "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
  "downsample_padding": 1,
  "dual_cross_attention": false,
  "flip_sin_to_cos": true,
  "freq_shift": 0,
  "in_channels": 4,
  "layers_per_block": 2,
  "mid_block_scale_factor": 1,
  "norm_eps": 1e-05,
  "norm_num_groups": 32,
  "num_class_embeds": null,
  "only_cross_attention": false,
  "out_channels": 4,
  "sample_size": 64,
  "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
  "upcast_attention": false,
  "use_linear_projection": true
})";


json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

// A copy of tiny_sd to corrupt.
struct TinySdCopy {
  test::TempDir tmp{"rtvd_diffusers"};
  std::string dir = tmp.path("tiny_sd");

  TinySdCopy() { fs::copy(test::test_data("tiny_sd"), dir, fs::copy_options::recursive); }
  void edit(const std::string& relative, const std::function<void(json&)>& change) const {
    json j = read_json(dir + "/" + relative);
    change(j);
    write_json(dir + "/" + relative, j);
  }
  std::string load_error() const {
    return error_of([&] { load_model({.path = dir}); });
  }
};

// The error of tiny_sd's unet/config.json after change, parsed alone.
std::string unet_config_error(const std::function<void(json&)>& change) {
  json j = read_json(test::test_data("tiny_sd/unet/config.json"));
  change(j);
  return error_of([&] { parse_diffusers_unet_config(j.dump(), "unet/config.json", DType::F16); });
}

TEST(DiffusersFolder, TinySdComponents) {
  const std::string dir = test::test_data("tiny_sd");
  ASSERT_TRUE(is_diffusers_folder(dir));
  EXPECT_FALSE(is_diffusers_folder(test::test_data("tiny_sd/unet")));
  const DiffusersFolder f = open_diffusers_folder(dir);
  EXPECT_EQ(f.root, dir);
  EXPECT_EQ(f.unet_config, dir + "/unet/config.json");
  EXPECT_EQ(f.unet_weights, dir + "/unet/diffusion_pytorch_model.safetensors");
  EXPECT_EQ(f.text_encoder_dir, dir + "/text_encoder");
  EXPECT_EQ(f.tokenizer_dir, dir + "/tokenizer");
  EXPECT_EQ(f.vae_dir, dir + "/vae");
  EXPECT_EQ(f.scheduler_config, dir + "/scheduler/scheduler_config.json");
}

TEST(DiffusersFolder, TinySdMapsOntoModelConfig) {
  const Model m = load_model({.path = test::test_data("tiny_sd")});
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.name, "tiny_sd");
  EXPECT_EQ(c.dtype, DType::F16);
  EXPECT_EQ(c.sample_size, 32);
  EXPECT_EQ(c.in_channels, 4);
  EXPECT_EQ(c.out_channels, 4);
  EXPECT_EQ(c.block_out_channels, (std::vector<int>{32, 64}));
  EXPECT_EQ(c.layers_per_block, 1);
  EXPECT_EQ(c.norm, NormKind::Group);
  EXPECT_EQ(c.norm_num_groups, 8);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.attention_levels, (std::vector<bool>{true, false}));
  EXPECT_TRUE(c.mid_attention);
  // attention_head_dim [1, 2] is heads: 1 of 32 channels at level 0, 2 of 64 in the mid block.
  EXPECT_EQ(c.attention_head_dim, 32);
  EXPECT_EQ(c.num_attention_heads, 0);
  EXPECT_EQ(c.transformer_layers_per_block, (std::vector<int>{1, 1}));
  EXPECT_EQ(c.cross_attention_dim, 32);
  EXPECT_EQ(c.context_length, 77);
  EXPECT_TRUE(c.use_linear_projection);
  EXPECT_EQ(c.num_class_embeds, 0);
  EXPECT_TRUE(c.flip_sin_to_cos);
  EXPECT_FLOAT_EQ(c.freq_shift, 0.0f);
  EXPECT_FLOAT_EQ(c.timestep_scale, 1000.0f);
  ASSERT_TRUE(m.text_encoder.has_value());
  EXPECT_EQ(m.text_encoder->tensors.label(), test::test_data("tiny_sd") + "/text_encoder/model.safetensors");
  EXPECT_EQ(m.tokenizer_dir, test::test_data("tiny_sd") + "/tokenizer");
}

// The U-Net's graph consumes every tensor of its file, and a forward gives finite values.
TEST(DiffusersFolder, TinySdUNetRunsOnEveryTensor) {
  const Model m = load_model({.path = test::test_data("tiny_sd")});
  WeightStore unet(SafeTensorsFile::open(test::test_data("tiny_sd/unet/diffusion_pytorch_model.safetensors")));
  auto backend = make_cpu_backend(1);
  const int side = m.config.sample_size;
  UNetRunner runner(m.config, unet, *backend, 1, side, side, 0.5f);
  unet.check_all_read();
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  runner.set_inputs(rng.normal_vector(size_t(side) * side * m.config.in_channels), {},
                    rng.normal_vector(size_t(m.config.context_length) * m.config.cross_attention_dim));
  runner.forward();
  const std::vector<float> v = runner.output();
  EXPECT_EQ(v.size(), size_t(side) * side * m.config.out_channels);
  EXPECT_TRUE(test::all_finite(v));
}

TEST(DiffusersFolder, Fp16VariantWeights) {
  const TinySdCopy copy;
  fs::rename(copy.dir + "/unet/diffusion_pytorch_model.safetensors",
             copy.dir + "/unet/diffusion_pytorch_model.fp16.safetensors");
  EXPECT_EQ(open_diffusers_folder(copy.dir).unet_weights,
            copy.dir + "/unet/diffusion_pytorch_model.fp16.safetensors");
  EXPECT_EQ(load_model({.path = copy.dir}).weights->checkpoint_parameters(),
            load_model({.path = test::test_data("tiny_sd")}).weights->checkpoint_parameters());
}

TEST(DiffusersUNetConfig, Sd15MapsOntoTheBuiltinConfig) {
  const ModelConfig c = parse_diffusers_unet_config(kSd15, "sd15/unet/config.json", DType::F16);
  test::expect_same_architecture(c, builtin_model_config("sd15"));
  EXPECT_EQ(c.num_attention_heads, 8);  // attention_head_dim 8 is 8 heads at every level
}

TEST(DiffusersUNetConfig, Sd21MapsOntoTheBuiltinConfig) {
  const ModelConfig c = parse_diffusers_unet_config(kSd21Base, "sd21/unet/config.json", DType::F32);
  test::expect_same_architecture(c, builtin_model_config("sd21"));
  EXPECT_EQ(c.attention_head_dim, 64);  // 5/10/20 heads of 320/640/1280 channels
  EXPECT_EQ(c.dtype, DType::F32);
  EXPECT_EQ(c.name, "sd21/unet/config.json");

  // stabilityai/stable-diffusion-2-1 (768): the same U-Net at 96x96 latents, attention upcast to fp32.
  json sd21_768 = json::parse(kSd21Base);
  sd21_768["sample_size"] = 96;
  sd21_768["upcast_attention"] = true;
  ModelConfig expected = builtin_model_config("sd21");
  expected.sample_size = 96;
  test::expect_same_architecture(parse_diffusers_unet_config(sd21_768.dump(), "sd21-768", DType::F16), expected);
}

// A missing key means diffusers' default, not ModelConfig's: SD 1.5's U-Net with a context of 1280.
TEST(DiffusersUNetConfig, MissingKeysTakeDiffusersDefaults) {
  const ModelConfig c =
      parse_diffusers_unet_config(R"({"_class_name": "UNet2DConditionModel", "sample_size": 64})", "u", DType::F16);
  ModelConfig expected = builtin_model_config("sd15");
  expected.cross_attention_dim = 1280;
  test::expect_same_architecture(c, expected);
}

TEST(DiffusersUNetConfig, NumAttentionHeadsIsAHeadCount) {
  json j = json::parse(kSd21Base);
  j["num_attention_heads"] = 8;  // attention_head_dim beside it sizes nothing rtvd builds
  const ModelConfig c = parse_diffusers_unet_config(j.dump(), "u", DType::F16);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.attention_head_dim, 0);
}

TEST(DiffusersUNetConfig, RefusalsNameTheKey) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "unet/config.json: key 'class_embed_type': a class embedding is not supported by rtvd: "
                      "expected null, got string \"timestep\"",
                      unet_config_error([](json& j) { j["class_embed_type"] = "timestep"; }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "unet/config.json: key 'mid_block_type': a mid block other than ResNet, transformer, ResNet is "
                      "not supported by rtvd: expected \"UNetMidBlock2DCrossAttn\", got string \"UNetMidBlock2D\"",
                      unet_config_error([](json& j) { j["mid_block_type"] = "UNetMidBlock2D"; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'mid_block_type'",
                      unet_config_error([](json& j) { j["mid_block_type"] = nullptr; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'conv_in_kernel': another conv_in kernel is not supported by rtvd: expected 3",
                      unet_config_error([](json& j) { j["conv_in_kernel"] = 1; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "unet/config.json: key 'brand_new_option': expected one of the known keys",
                      unet_config_error([](json& j) { j["brand_new_option"] = 1; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key '_class_name': expected \"UNet2DConditionModel\", got string \"UNet2DModel\"",
                      unet_config_error([](json& j) { j["_class_name"] = "UNet2DModel"; }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "unet/config.json: key 'up_block_types': expected [\"UpBlock2D\",\"CrossAttnUpBlock2D\"] "
                      "(down_block_types mirrored)",
                      unet_config_error([](json& j) { j["up_block_types"] = {"CrossAttnUpBlock2D", "UpBlock2D"}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'down_block_types': expected \"CrossAttnDownBlock2D\" or \"DownBlock2D\"",
                      unet_config_error([](json& j) { j["down_block_types"][1] = "AttnDownBlock2D"; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'down_block_types': expected 2 entries",
                      unet_config_error([](json& j) { j["down_block_types"] = {"DownBlock2D"}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'layers_per_block': expected the same value at every level",
                      unet_config_error([](json& j) { j["layers_per_block"] = {1, 2}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'transformer_layers_per_block': expected an integer or 2 integers",
                      unet_config_error([](json& j) { j["transformer_layers_per_block"] = {1, 1, 1}; }));
  // 1 head of 32 channels, 4 of 64 in the mid block: neither the head count nor the head dim is one value.
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "key 'attention_head_dim': expected head counts that are the same at every attention level",
                      unet_config_error([](json& j) { j["attention_head_dim"] = {1, 4}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'attention_head_dim': expected a divisor of block_out_channels[1] = 64",
                      unet_config_error([](json& j) { j["attention_head_dim"] = {1, 3}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'attention_head_dim': expected an integer",
                      unet_config_error([](json& j) { j["attention_head_dim"] = nullptr; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'sample_size': expected an integer",
                      unet_config_error([](json& j) { j["sample_size"] = {32, 32}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'norm_num_groups': expected an integer",
                      unet_config_error([](json& j) { j["norm_num_groups"] = nullptr; }));
  // The consistency checks shared with config.json.
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'sample_size': expected a multiple of 2",
                      unet_config_error([](json& j) { j["sample_size"] = 33; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "key 'norm_num_groups': expected a divisor of block_out_channels[0] = 32",
                      unet_config_error([](json& j) { j["norm_num_groups"] = 5; }));
}

TEST(DiffusersUNetConfig, UpcastAttentionEitherWay) {
  for (bool upcast : {false, true})
    EXPECT_EQ(unet_config_error([&](json& j) { j["upcast_attention"] = upcast; }), "<no error thrown>");
}

TEST(DiffusersFolder, MissingComponentFolder) {
  const TinySdCopy copy;
  fs::remove_all(copy.dir + "/vae");
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "tiny_sd/model_index.json: key 'vae': the pipeline lists this component, but its folder",
                      copy.load_error());
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/vae is missing", copy.load_error());

  // Not listed: not looked for.
  copy.edit("model_index.json", [](json& j) { j["vae"] = {nullptr, nullptr}; });
  EXPECT_EQ(open_diffusers_folder(copy.dir).vae_dir, "");
}

// An inpainting or InstructPix2Pix U-Net (latents plus an image's latents, and a mask) is refused by what it is.
TEST(DiffusersFolder, InpaintingAndImageConditionedUNetsAreRefusedByName) {
  const TinySdCopy copy;
  for (const auto& [in, what] : {std::pair{9, "is an inpainting model, which rtvd does not run"},
                                 std::pair{8, "is an image-conditioned model (InstructPix2Pix), which rtvd does not run"},
                                 std::pair{5, "the autoencoder's 4 latent channels do not fit the U-Net's 5 in and 4 out\n"}}) {
    copy.edit("unet/config.json", [&, in = in](json& j) { j["in_channels"] = in; });
    EXPECT_PRED_FORMAT2(IsSubstring, what, copy.load_error() + "\n");
  }
}

TEST(DiffusersFolder, UnknownKeyInTheUNetConfig) {
  const TinySdCopy copy;
  copy.edit("unet/config.json", [](json& j) { j["brand_new_option"] = true; });
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/unet/config.json: key 'brand_new_option': expected one of the known keys",
                      copy.load_error());
}

TEST(DiffusersFolder, UnsupportedValueInTheUNetConfig) {
  const TinySdCopy copy;
  copy.edit("unet/config.json", [](json& j) { j["class_embed_type"] = "timestep"; });
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "tiny_sd/unet/config.json: key 'class_embed_type': a class embedding is not supported by rtvd: "
                      "expected null, got string \"timestep\"",
                      copy.load_error());
}

TEST(DiffusersFolder, MismatchedUpBlockTypes) {
  const TinySdCopy copy;
  copy.edit("unet/config.json", [](json& j) { j["up_block_types"] = {"CrossAttnUpBlock2D", "UpBlock2D"}; });
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/unet/config.json: key 'up_block_types': expected", copy.load_error());
}

TEST(DiffusersFolder, PickleOnlyWeights) {
  const TinySdCopy copy;
  fs::remove(copy.dir + "/unet/diffusion_pytorch_model.safetensors");
  std::ofstream(copy.dir + "/unet/diffusion_pytorch_model.bin") << "not read";
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/unet/diffusion_pytorch_model.bin: the U-Net's weights are a pickle, which "
                      "rtvd never unpickles", copy.load_error());
  EXPECT_PRED_FORMAT2(IsSubstring, "convert them to diffusion_pytorch_model.safetensors", copy.load_error());

  fs::remove(copy.dir + "/unet/diffusion_pytorch_model.bin");
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/unet: expected diffusion_pytorch_model.safetensors or", copy.load_error());
}

TEST(DiffusersFolder, ModelIndexRefusals) {
  const TinySdCopy copy;
  const auto error_after = [&](const std::function<void(json&)>& change) {
    const json original = read_json(copy.dir + "/model_index.json");
    copy.edit("model_index.json", change);
    const std::string e = copy.load_error();
    write_json(copy.dir + "/model_index.json", original);
    return e;
  };
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "tiny_sd/model_index.json: key '_class_name': expected \"StableDiffusionPipeline\" or "
                      "\"StableDiffusionImg2ImgPipeline\" or \"StableDiffusionXLPipeline\" or "
                      "\"StableDiffusionXLImg2ImgPipeline\", got string \"StableDiffusionInpaintPipeline\"",
                      error_after([](json& j) { j["_class_name"] = "StableDiffusionInpaintPipeline"; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/model_index.json: key 'text_encoder_2': expected [null, null] or no key "
                      "(an SD pipeline has one text encoder",
                      error_after([](json& j) { j["text_encoder_2"] = {"transformers", "CLIPTextModel"}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/model_index.json: key 'text_encoder_2': an SDXL pipeline needs both text "
                      "encoders and both tokenizers",
                      error_after([](json& j) { j["_class_name"] = "StableDiffusionXLPipeline"; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/model_index.json: key 'unknown_key': expected one of the known keys",
                      error_after([](json& j) { j["unknown_key"] = {"transformers", "CLIPTextModel"}; }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "tiny_sd/model_index.json: key 'tokenizer': expected [library, class] or [null, null]",
                      error_after([](json& j) { j["tokenizer"] = {"transformers"}; }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "tiny_sd/model_index.json: key 'unet': expected [\"diffusers\", \"UNet2DConditionModel\"]",
                      error_after([](json& j) { j["unet"] = {nullptr, nullptr}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/model_index.json: key 'unet': expected",
                      error_after([](json& j) { j.erase("unet"); }));
  EXPECT_EQ(copy.load_error(), "<no error thrown>");  // the original restored

  fs::remove(copy.dir + "/scheduler/scheduler_config.json");
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/scheduler/scheduler_config.json: missing", copy.load_error());
}

// diffusers builds the class model_index.json lists from the component's config (a scheduler's converted to
// it), rtvd the class the config names: where they differ, which was meant is unclear, so neither is guessed.
TEST(DiffusersFolder, ModelIndexClassesAgreeWithTheComponentConfigs) {
  const TinySdCopy copy;
  const auto error_after = [&](const std::string& file, const std::function<void(json&)>& change) {
    const json original = read_json(copy.dir + "/" + file);
    copy.edit(file, change);
    const std::string e = copy.load_error();
    write_json(copy.dir + "/" + file, original);
    return e;
  };
  EXPECT_EQ(error_after("model_index.json", [](json& j) { j["scheduler"] = {"diffusers", "DDIMScheduler"}; }),
            cat(copy.dir, "/model_index.json: key 'scheduler' lists class DDIMScheduler, but ", copy.dir,
                "/scheduler/scheduler_config.json has _class_name EulerDiscreteScheduler: make them agree (diffusers "
                "would build the listed class from that config)"));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      cat("/model_index.json: key 'scheduler' lists class EulerDiscreteScheduler, but ", copy.dir,
                          "/scheduler/scheduler_config.json has _class_name LCMScheduler: "),
                      error_after("scheduler/scheduler_config.json", [](json& j) { j["_class_name"] = "LCMScheduler"; }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      cat("/model_index.json: key 'vae' lists class AutoencoderTiny, but ", copy.dir,
                          "/vae/config.json has _class_name AutoencoderKL: "),
                      error_after("model_index.json", [](json& j) { j["vae"] = {"diffusers", "AutoencoderTiny"}; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "/model_index.json: key 'vae' lists class Autoencoder\\u001b[2JKL, but ",
                      error_after("model_index.json", [](json& j) { j["vae"] = {"diffusers", "Autoencoder\x1b[2JKL"}; }));
  // Changed in both files alike, the class is taken.
  copy.edit("model_index.json", [](json& j) { j["scheduler"] = {"diffusers", "LCMScheduler"}; });
  copy.edit("scheduler/scheduler_config.json", [](json& j) { j["_class_name"] = "LCMScheduler"; });
  EXPECT_EQ(load_model({.path = copy.dir}).scheduler->class_name, "LCMScheduler");
}

TEST(DiffusersFolder, NotADirectoryMentionsBothLayouts) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "a diffusers folder with model_index.json, or config.json and weights.safetensors in it) or a "
                      "single-file .safetensors checkpoint",
                      error_of([] { load_model({.path = test::test_data("tiny_sd/model_index.json")}); }));
  EXPECT_PRED_FORMAT2(IsSubstring, "tiny_sd/unet: a component of the diffusers folder",
                      error_of([] { load_model({.path = test::test_data("tiny_sd/unet")}); }));
}

}  // namespace
}  // namespace rtvd
