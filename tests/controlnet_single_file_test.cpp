// ControlNet single files in the original layout (pipeline/model_files/controlnet_single_file.h):
//   - tests/data/tiny_controlnet_single_file (tools/reference/export_tiny_controlnet_single_file.py): a tiny
//     ControlNet of tests/data/tiny_sd's U-Net as one file without and with control_model., which diffusers'
//     from_single_file reads back to its folder: every tensor equals the folder's, bit for bit; and full-size SD
//     1.5, SD 2.1 and SDXL ControlNets' names and shapes: the config inferred from them is diffusers' config.json;
//   - the same full-size layouts built here from rtvd's U-Net parameter lists (shape-only files): the
//     architecture and config from the shapes, both prefixes, every name;
//   - every bad file: one line naming the file and the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/controlnet_single_file.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/model_files/ldm_layout.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/single_file.h"
#include "pipeline/models/unet.h"
#include "support/model_configs.h"
#include "support/tensor_files.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

// ---- a ControlNet's tensors, written here from a U-Net config

constexpr const char* kPrefix = "control_model.";
const std::vector<int64_t> kHintWidths = {16, 32, 96, 256};  // ControlNet's hint block, every published net's

// The U-Net's parameters that a ControlNet copies: all but the up path and the output.
std::vector<TensorSpec> encoder_parameters(const ModelConfig& unet) {
  std::vector<TensorSpec> out = unet_parameters(unet);
  std::erase_if(out, [](const TensorSpec& s) {
    return s.name.starts_with("up_blocks.") || s.name.starts_with("conv_out.") || s.name.starts_with("conv_norm_out.");
  });
  return out;
}

// The widths after each block of the encoder, in order (conv_in, each level's ResNets, its downsampler), and
// after the mid block last: what the zero convs take.
std::vector<int64_t> block_widths(const ModelConfig& unet) {
  const std::vector<int>& c = unet.block_out_channels;
  std::vector<int64_t> out = {c[0]};
  for (size_t l = 0; l < c.size(); ++l) {
    out.insert(out.end(), size_t(unet.layers_per_block), c[l]);
    if (l + 1 < c.size()) out.push_back(c[l]);
  }
  out.push_back(c.back());
  return out;
}

// diffusers' names of the ControlNet-only tensors: the hint block from 3 channels, the zero convs.
std::vector<TensorSpec> controlnet_only_parameters(const ModelConfig& unet) {
  std::vector<TensorSpec> out;
  const auto conv = [&](const std::string& name, int64_t o, int64_t i, int64_t k) {
    out.push_back({name + ".weight", DType::F16, {o, i, k, k}});
    out.push_back({name + ".bias", DType::F16, {o}});
  };
  const std::string e = "controlnet_cond_embedding.";
  conv(e + "conv_in", kHintWidths[0], 3, 3);
  for (size_t i = 0; i + 1 < kHintWidths.size(); ++i) {
    conv(cat(e, "blocks.", 2 * i), kHintWidths[i], kHintWidths[i], 3);
    conv(cat(e, "blocks.", 2 * i + 1), kHintWidths[i + 1], kHintWidths[i], 3);
  }
  conv(e + "conv_out", unet.block_out_channels[0], kHintWidths.back(), 3);
  const std::vector<int64_t> widths = block_widths(unet);
  for (size_t i = 0; i + 1 < widths.size(); ++i) conv(cat("controlnet_down_blocks.", i), widths[i], widths[i], 1);
  conv("controlnet_mid_block", widths.back(), widths.back(), 1);
  return out;
}

// The name in the original layout of a ControlNet-only tensor (written out here, as ControlNet's cldm.py numbers
// its modules: the hint block's convs at every second index, SiLU between).
std::string original_controlnet_name(const std::string& name) {
  const std::map<std::string, std::string> hint = {
      {"conv_in", "0"},   {"blocks.0", "2"},  {"blocks.1", "4"},  {"blocks.2", "6"},
      {"blocks.3", "8"},  {"blocks.4", "10"}, {"blocks.5", "12"}, {"conv_out", "14"}};
  const size_t dot = name.rfind('.');
  const std::string module = name.substr(0, dot), wb = name.substr(dot);
  if (module.starts_with("controlnet_cond_embedding.")) return "input_hint_block." + hint.at(module.substr(26)) + wb;
  if (module == "controlnet_mid_block") return "middle_block_out.0" + wb;
  return "zero_convs." + module.substr(std::string("controlnet_down_blocks.").size()) + ".0" + wb;
}

// U-Net parameters under their original names (ldm_unet_names) with prefix.
std::vector<TensorSpec> original_unet_names(std::vector<TensorSpec> specs, const std::string& prefix) {
  std::vector<std::string> names;
  for (const TensorSpec& s : specs) names.push_back(s.name);
  const std::map<std::string, std::string> original = ldm_unet_names(names);
  for (TensorSpec& s : specs) s.name = prefix + original.at(s.name);
  return specs;
}

// The whole ControlNet of a U-Net config, under the original names with prefix.
std::vector<TensorSpec> original_controlnet(const ModelConfig& unet, const std::string& prefix) {
  std::vector<TensorSpec> out = original_unet_names(encoder_parameters(unet), prefix);
  for (const TensorSpec& s : controlnet_only_parameters(unet))
    out.push_back({prefix + original_controlnet_name(s.name), s.dtype, s.shape});
  return out;
}

ModelConfig sdxl_unet() { return parse_diffusers_unet_config(test::kSdxlBaseUNetConfig, "sdxl", DType::F16); }

// The config.json diffusers has for each (lllyasviel/sd-controlnet-canny, thibaud/controlnet-sd21-canny-diffusers,
// diffusers/controlnet-canny-sdxl-1.0), the keys that the shapes settle.
json published_config(const std::string& architecture) {
  json c = {{"_class_name", "ControlNetModel"},
            {"in_channels", 4},
            {"conditioning_channels", 3},
            {"conditioning_embedding_out_channels", kHintWidths},
            {"block_out_channels", {320, 640, 1280, 1280}},
            {"layers_per_block", 2},
            {"down_block_types", {"CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"}},
            {"norm_num_groups", 32},
            {"cross_attention_dim", 768},
            {"attention_head_dim", 8},
            {"use_linear_projection", false},
            {"transformer_layers_per_block", 1}};
  if (architecture == "SD 2.x") {
    c["cross_attention_dim"] = 1024;
    c["attention_head_dim"] = {5, 10, 20, 20};
    c["use_linear_projection"] = true;
  }
  if (architecture == "SDXL") {
    c["block_out_channels"] = {320, 640, 1280};
    c["down_block_types"] = {"DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"};
    c["cross_attention_dim"] = 2048;
    c["attention_head_dim"] = {5, 10, 20};
    c["use_linear_projection"] = true;
    c["transformer_layers_per_block"] = {1, 2, 10};
    c["addition_embed_type"] = "text_time";
    c["addition_time_embed_dim"] = 256;
    c["projection_class_embeddings_input_dim"] = 2816;
  }
  return c;
}

struct FullSize {
  const char* architecture;
  ModelConfig unet;
};

std::vector<FullSize> full_size() {
  return {{"SD 1.x", builtin_model_config("sd15")}, {"SD 2.x", builtin_model_config("sd21")}, {"SDXL", sdxl_unet()}};
}

TEST(FullSizeControlNet, ShapesGiveThePublishedConfigs) {
  for (const FullSize& f : full_size()) {
    SCOPED_TRACE(f.architecture);
    std::map<std::string, std::vector<int64_t>> want;
    for (const TensorSpec& s : encoder_parameters(f.unet)) want[s.name] = s.shape;
    for (const TensorSpec& s : controlnet_only_parameters(f.unet)) want[s.name] = s.shape;
    std::vector<json> configs;
    for (const std::string prefix : {"", kPrefix}) {
      const test::ShapeOnlyFile file(original_controlnet(f.unet, prefix), {});
      const ControlNetSingleFile c = read_controlnet_single_file(file.file("net.safetensors"));
      EXPECT_EQ(c.architecture, f.architecture);
      EXPECT_EQ(c.controlnet.config_label, cat("net.safetensors (", f.architecture, " ControlNet, inferred from its shapes)"));
      EXPECT_EQ(json::parse(c.controlnet.config_json), published_config(f.architecture));
      std::map<std::string, std::vector<int64_t>> got;
      for (const TensorView& t : c.controlnet.tensors.tensors()) got[t.name] = t.shape;
      EXPECT_EQ(got, want);
      // ControlNet's own names for some (diffusers' convert_controlnet_checkpoint).
      for (const auto& [diffusers, original] : std::map<std::string, std::string>{
               {"controlnet_cond_embedding.conv_in.weight", "input_hint_block.0.weight"},
               {"controlnet_cond_embedding.blocks.3.bias", "input_hint_block.8.bias"},
               {"controlnet_cond_embedding.conv_out.weight", "input_hint_block.14.weight"},
               {"controlnet_down_blocks.0.weight", "zero_convs.0.0.weight"},
               {"controlnet_down_blocks.3.bias", "zero_convs.3.0.bias"},
               {"controlnet_mid_block.weight", "middle_block_out.0.weight"},
               {"conv_in.weight", "input_blocks.0.0.weight"},
               {"down_blocks.1.resnets.0.conv1.weight", "input_blocks.4.0.in_layers.2.weight"},
               {"mid_block.resnets.1.conv2.weight", "middle_block.2.out_layers.3.weight"},
               {"time_embedding.linear_1.weight", "time_embed.0.weight"}})
        EXPECT_EQ(c.controlnet.tensors.source_name(diffusers), prefix + original);
      if (std::string(f.architecture) == "SDXL")
        EXPECT_EQ(c.controlnet.tensors.source_name("add_embedding.linear_2.weight"), prefix + "label_emb.0.2.weight");
    }
  }
}

// ControlNet's training checkpoints hold the Stable Diffusion model beside control_model.*: only the ControlNet
// is read, as diffusers reads it.
TEST(FullSizeControlNet, BesideAStableDiffusionModel) {
  const ModelConfig sd15 = builtin_model_config("sd15");
  std::vector<TensorSpec> specs = original_controlnet(sd15, kPrefix);
  for (const TensorSpec& s : original_unet_names(unet_parameters(sd15), "model.diffusion_model.")) specs.push_back(s);
  specs.push_back({"first_stage_model.decoder.conv_out.weight", DType::F16, {3, 128, 3, 3}});
  const test::ShapeOnlyFile file(specs, {});
  const ControlNetSingleFile c = read_controlnet_single_file(file.file("cldm.safetensors"));
  EXPECT_EQ(c.architecture, "SD 1.x");
  EXPECT_EQ(c.controlnet.tensors.tensors().size(), original_controlnet(sd15, "").size());
  EXPECT_EQ(c.controlnet.tensors.source_name("conv_in.weight"), "control_model.input_blocks.0.0.weight");
}

TEST(FullSizeControlNet, AConfigFolderDescribesTheFile) {
  test::TempDir dir;
  const std::string folder = dir.path("cn");
  fs::create_directories(folder);
  const std::string text = R"({"_class_name": "ControlNetModel", "global_pool_conditions": true})";
  std::ofstream(folder + "/config.json") << text;
  const test::ShapeOnlyFile file(original_controlnet(builtin_model_config("sd15"), ""), {});
  const ControlNetSingleFile c = read_controlnet_single_file(file.file("net.safetensors"), folder);
  EXPECT_EQ(c.controlnet.config_json, text);
  EXPECT_EQ(c.controlnet.config_label, folder + "/config.json");
  EXPECT_EQ(c.architecture, "config of " + folder);
}

// ---- bad files: each a full-size SD 1.5 ControlNet, edited

std::string error_of_edit(const std::function<void(std::vector<TensorSpec>&)>& edit, const std::string& prefix = "",
                          const ModelConfig& unet = builtin_model_config("sd15")) {
  std::vector<TensorSpec> specs = original_controlnet(unet, prefix);
  edit(specs);
  const test::ShapeOnlyFile file(specs, {});
  return error_of([&] { read_controlnet_single_file(file.file("net.safetensors")); });
}

void erase_named(std::vector<TensorSpec>& t, const std::string& name) {
  const size_t before = t.size();
  std::erase_if(t, [&](const TensorSpec& s) { return s.name == name; });
  ASSERT_EQ(t.size(), before - 1) << name;
}

TensorSpec& named(std::vector<TensorSpec>& t, const std::string& name) {
  for (TensorSpec& s : t)
    if (s.name == name) return s;
  fail("no tensor ", name);
}

TEST(ControlNetErrors, HintBlock) {
  EXPECT_EQ(error_of_edit([](auto& t) { named(t, "input_hint_block.6.weight").name = "input_hint_block.7.weight"; }),
            "net.safetensors: tensor 'input_hint_block.7.weight': expected the hint block's convs, input_hint_block.0 to "
            "14 by 2 (SiLU between them), each a weight and a bias");
  EXPECT_EQ(error_of_edit([](auto& t) { t.push_back({"input_hint_block.16.weight", DType::F16, {3, 3, 3, 3}}); }),
            "net.safetensors: tensor 'input_hint_block.16.weight': expected the hint block's convs, input_hint_block.0 "
            "to 14 by 2 (SiLU between them), each a weight and a bias");
  EXPECT_EQ(error_of_edit([](auto& t) { erase_named(t, "control_model.input_hint_block.14.weight"); }, kPrefix),
            "net.safetensors: no tensor control_model.input_hint_block.14.weight: a ControlNet's hint block has 8 convs, "
            "input_hint_block.0 to 14 by 2");
  EXPECT_EQ(error_of_edit([](auto& t) { erase_named(t, "input_hint_block.4.bias"); }),
            "net.safetensors: no tensor input_hint_block.4.bias: a ControlNet's hint block has 8 convs, input_hint_block.0 "
            "to 14 by 2");
  // Widths that do not chain: into conv 8 from 32, out of the block into the encoder's 320.
  EXPECT_EQ(error_of_edit([](auto& t) { named(t, "input_hint_block.8.weight").shape = {96, 48, 3, 3}; }),
            "net.safetensors: tensor 'input_hint_block.8.weight' (controlnet_cond_embedding.blocks.3.weight): expected "
            "shape (96, 32, 3, 3), got (96, 48, 3, 3)");
  EXPECT_EQ(error_of_edit([](auto& t) {
              named(t, "input_hint_block.14.weight").shape = {256, 256, 3, 3};
              named(t, "input_hint_block.14.bias").shape = {256};
            }),
            "net.safetensors: tensor 'input_hint_block.14.weight' (controlnet_cond_embedding.conv_out.weight): expected "
            "shape (320, 256, 3, 3), got (256, 256, 3, 3)");
  EXPECT_EQ(error_of_edit([](auto& t) {
              named(t, "input_hint_block.0.weight").shape = {16, 0, 3, 3};
            }),
            "net.safetensors: tensor 'input_hint_block.0.weight' (controlnet_cond_embedding.conv_in.weight): a conv of no "
            "channels");
  EXPECT_EQ(error_of_edit([](auto& t) { named(t, "input_hint_block.0.bias").shape = {17}; }),
            "net.safetensors: tensor 'input_hint_block.0.bias' (controlnet_cond_embedding.conv_in.bias): expected shape "
            "(16), got (17)");
}

TEST(ControlNetErrors, ZeroConvs) {
  EXPECT_EQ(error_of_edit([](auto& t) { erase_named(t, "zero_convs.5.0.weight"); }),
            "net.safetensors: no tensor zero_convs.5.0.weight: a ControlNet has a zero conv after each of its encoder's "
            "12 blocks ('input_blocks.5.0.out_layers.3.weight' (down_blocks.1.resnets.1.conv2.weight) is block 5)");
  EXPECT_EQ(error_of_edit([](auto& t) { erase_named(t, "control_model.zero_convs.11.0.bias"); }, kPrefix),
            "net.safetensors: no tensor control_model.zero_convs.11.0.bias: a ControlNet has a zero conv after each of "
            "its encoder's 12 blocks ('control_model.input_blocks.11.0.out_layers.3.weight' "
            "(down_blocks.3.resnets.1.conv2.weight) is block 11)");
  EXPECT_EQ(error_of_edit([](auto& t) { t.push_back({"zero_convs.12.0.weight", DType::F16, {1280, 1280, 1, 1}}); }),
            "net.safetensors: tensor 'zero_convs.12.0.weight': a zero conv past the encoder's 12 blocks (zero_convs.0 to 11)");
  EXPECT_EQ(error_of_edit([](auto& t) { named(t, "zero_convs.3.0.weight").name = "zero_convs.3.1.weight"; }),
            "net.safetensors: tensor 'zero_convs.3.1.weight': expected a zero conv, zero_convs.N.0.weight or .bias");
  EXPECT_EQ(error_of_edit([](auto& t) { named(t, "zero_convs.3.0.weight").shape = {640, 640, 1, 1}; }),
            "net.safetensors: tensor 'zero_convs.3.0.weight' (controlnet_down_blocks.3.weight): expected shape "
            "(320, 320, 1, 1), got (640, 640, 1, 1)");
  EXPECT_EQ(error_of_edit([](auto& t) { erase_named(t, "middle_block_out.0.weight"); }),
            "net.safetensors: no tensor middle_block_out.0.weight: a ControlNet's zero conv after its mid block");
  EXPECT_EQ(error_of_edit([](auto& t) {
              erase_named(t, "middle_block_out.0.weight");
              erase_named(t, "middle_block_out.0.bias");
            }),
            "net.safetensors: no tensor middle_block_out.0.weight: a ControlNet's zero conv after its mid block");
  EXPECT_EQ(error_of_edit([](auto& t) { named(t, "middle_block_out.0.bias").shape = {640}; }),
            "net.safetensors: tensor 'middle_block_out.0.bias' (controlnet_mid_block.bias): expected shape (1280), got (640)");
}

TEST(ControlNetErrors, NotAControlNet) {
  // A Stable Diffusion checkpoint's U-Net, given as a ControlNet.
  EXPECT_EQ(error_of_edit([](auto& t) {
              std::erase_if(t, [](const TensorSpec& s) { return !s.name.starts_with("input_blocks.") && !s.name.starts_with("middle_block."); });
              for (TensorSpec& s : t) s.name = "model.diffusion_model." + s.name;
            }),
            "net.safetensors: tensor 'model.diffusion_model.input_blocks.0.0.weight': a Stable Diffusion checkpoint (its "
            "U-Net, model.diffusion_model.*), not a ControlNet (control_model.input_hint_block.*, or input_hint_block.* alone)");
  EXPECT_EQ(error_of_edit([](auto& t) { t = {{"lora_unet_x.alpha", DType::F32, {}}}; }),
            "net.safetensors: no ControlNet tensor (control_model.input_hint_block.* or input_hint_block.*): not a "
            "ControlNet in the original layout");
  EXPECT_EQ(error_of_edit([](auto& t) {
              t = {{"controlnet_cond_embedding.conv_in.weight", DType::F16, {16, 3, 3, 3}}};
            }),
            "net.safetensors: tensor 'controlnet_cond_embedding.conv_in.weight': a ControlNet under diffusers' names: give "
            "its folder (this file as diffusion_pytorch_model.safetensors beside its config.json)");
  EXPECT_EQ(error_of_edit([](auto& t) { t.push_back({"output_blocks.0.0.in_layers.0.weight", DType::F16, {2560}}); }),
            "net.safetensors: tensor 'output_blocks.0.0.in_layers.0.weight': a U-Net's up path or output, which a "
            "ControlNet does not have (is this a Stable Diffusion checkpoint?)");
  EXPECT_EQ(error_of_edit([](auto& t) {
              std::erase_if(t, [](const TensorSpec& s) { return !s.name.starts_with("control_model.input_hint_block."); });
            }, kPrefix),
            "net.safetensors: no encoder (no tensor control_model.input_blocks.*): a ControlNet holds a copy of its U-Net's");
  EXPECT_EQ(error_of_edit([](auto& t) { named(t, "time_embed.0.weight").name = "time_embed.1.weight"; }),
            "net.safetensors: tensor 'time_embed.1.weight': not a tensor of the original U-Net layout (time_embed, "
            "label_emb, input_blocks, middle_block, output_blocks, out)");
}

TEST(ControlNetErrors, Architecture) {
  EXPECT_EQ(error_of_edit([](auto& t) { t.push_back({"label_emb.0.0.weight", DType::F16, {1280, 2816}}); }),
            "net.safetensors: tensor 'label_emb.0.0.weight' (add_embedding.linear_1.weight): an added embedding, which "
            "only SDXL's ControlNets take, in a SD 1.x ControlNet");
  EXPECT_EQ(error_of_edit([](auto& t) {
              for (TensorSpec& s : t)
                if (s.name.ends_with("attn2.to_k.weight") || s.name.ends_with("attn2.to_v.weight")) s.shape[1] = 512;
            }),
            "net.safetensors: tensor 'middle_block.1.transformer_blocks.0.attn2.to_k.weight' "
            "(mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight): cross-attention width 512 fits no known "
            "architecture (SD 1.x: 768, with 8 heads; SD 2.x: 1024, SDXL: 2048, with heads of 64), and the heads cannot be "
            "read off shapes: give the folder of a diffusers ControlNet whose config.json describes it");
  EXPECT_EQ(error_of_edit([](auto& t) { erase_named(t, "label_emb.0.0.weight"); }, "", sdxl_unet()),
            "net.safetensors: tensor 'add_embedding.linear_1.weight' is missing");
}

TEST(ControlNetErrors, PicklesAreRefused) {
  test::TempDir dir;
  for (const char* name : {"control_v11p_sd15_canny.pth", "control_sd15_depth.ckpt", "diffusion_pytorch_model.bin"}) {
    const std::string path = dir.path(name);
    std::ofstream(path) << "\x80\x02}q\x00.";
    EXPECT_EQ(error_of([&] { open_controlnet_single_file(path); }),
              path + ": a pickle ControlNet, which rtvd never unpickles (loading one can run code from the file): convert "
                     "it to .safetensors where you trust it, e.g. with torch.load(..., weights_only=True) and "
                     "safetensors.torch.save_file, or diffusers' scripts/convert_original_stable_diffusion_to_diffusers.py");
  }
}

// A ControlNet given where a Stable Diffusion checkpoint is expected (--model): one line saying what it is.
TEST(ControlNetErrors, AControlNetIsNotAModel) {
  for (const std::string prefix : {"", kPrefix}) {
    const test::ShapeOnlyFile file(original_controlnet(builtin_model_config("sd15"), prefix), {});
    EXPECT_EQ(error_of([&] { read_single_file(file.file("net.safetensors")); }),
              "net.safetensors: tensor '" + prefix + "input_hint_block.0.weight': a ControlNet (its hint block or zero "
              "convs), not a Stable Diffusion checkpoint");
  }
}

// ---- against diffusers (tools/reference/export_tiny_controlnet_single_file.py)

std::string exported() {
  return test::exported_dir("tiny_controlnet_single_file",
                            {"controlnet/config.json", "controlnet/diffusion_pytorch_model.safetensors",
                             "tiny_controlnet.manifest.json", "tiny_controlnet_prefixed.manifest.json",
                             "extras.safetensors", "sd15_controlnet.layout.json", "sd21_controlnet.layout.json",
                             "sdxl_controlnet.layout.json"},
                            "export_tiny_controlnet_single_file.py");
}

class TinyControlNet : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyControlNet, EveryTensorIsTheDiffusersFoldersBitForBit) {
  const std::string dir = exported();
  if (dir.empty()) return;
  const std::string weights = dir + "/controlnet/diffusion_pytorch_model.safetensors";
  std::map<std::string, std::string> metadata;
  const std::vector<TensorToWrite> tensors = test::packed_file_tensors(
      cat(dir, "/", GetParam(), ".manifest.json"), {weights, dir + "/extras.safetensors"}, metadata);
  test::TempDir tmp;
  const std::string path = tmp.path("net.safetensors");
  write_safetensors(path, tensors, metadata);
  const ControlNetSingleFile c = open_controlnet_single_file(path, dir + "/controlnet");
  EXPECT_EQ(c.controlnet.config_json, read_config_file(dir + "/controlnet/config.json"));

  const SafeTensorsFile folder = SafeTensorsFile::open(weights);
  std::set<std::string> want, got;
  for (const TensorView& t : folder.tensors()) want.insert(t.name);
  const bool prefixed = std::string(GetParam()).ends_with("_prefixed");
  for (const TensorView& t : c.controlnet.tensors.tensors()) {
    got.insert(t.name);
    EXPECT_EQ(c.controlnet.tensors.source_name(t.name).starts_with(kPrefix), prefixed) << t.name;
    const TensorView* f = folder.find(t.name);
    ASSERT_NE(f, nullptr) << "the folder has no " << t.name << " (from " << c.controlnet.tensors.source_name(t.name) << ")";
    EXPECT_EQ(t.dtype, f->dtype) << t.name;
    EXPECT_EQ(t.shape, f->shape) << t.name;
    ASSERT_EQ(t.bytes, f->bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, f->data, t.bytes), 0) << t.name << " differs from " << c.controlnet.tensors.source_name(t.name);
  }
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Exported, TinyControlNet, ::testing::Values("tiny_controlnet", "tiny_controlnet_prefixed"));

// diffusers' ControlNetModel of each architecture, its names in the original layout and shapes: the config
// inferred from them is diffusers' on every key inferred, and those are every key of the architecture.
class FullSizeLayout : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(FullSizeLayout, InferredConfigIsDiffusers) {
  const std::string dir = exported();
  if (dir.empty()) return;
  const auto [name, architecture] = GetParam();
  std::ifstream in(cat(dir, "/", name, ".layout.json"));
  const json layout = json::parse(in);
  std::vector<TensorSpec> specs;
  for (const json& t : layout.at("tensors"))
    specs.push_back({t.at(0).get<std::string>(), DType::F16, t.at(2).get<std::vector<int64_t>>()});
  const test::ShapeOnlyFile file(specs, {});
  const ControlNetSingleFile c = read_controlnet_single_file(file.file(cat(name, ".safetensors")));
  EXPECT_EQ(c.architecture, architecture);
  const json inferred = json::parse(c.controlnet.config_json), diffusers = layout.at("config");
  for (const auto& [key, value] : inferred.items()) EXPECT_EQ(value, diffusers.at(key)) << key;
  const json architecture_keys = published_config(architecture);
  for (const auto& [key, value] : architecture_keys.items()) EXPECT_TRUE(inferred.contains(key)) << key;
}

INSTANTIATE_TEST_SUITE_P(Exported, FullSizeLayout,
                         ::testing::Values(std::pair{"sd15_controlnet", "SD 1.x"}, std::pair{"sd21_controlnet", "SD 2.x"},
                                           std::pair{"sdxl_controlnet", "SDXL"}));

}  // namespace
}  // namespace rtvd
