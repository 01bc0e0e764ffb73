// The VAE of an original-layout checkpoint (the autoencoder of ldm/modules/diffusionmodules/model.py) and
// diffusers' AutoencoderKL: the renaming, and the config read off the shapes.
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/dotted_name.h"
#include "pipeline/model_files/ldm_layout.h"

namespace rtvd {

namespace {

// "<module>.weight|bias" with module renamed by table; "" when it is not there.
std::string rename(std::string_view rest, std::initializer_list<std::pair<std::string_view, std::string_view>> table) {
  for (const auto& [from, to] : table)
    for (std::string_view wb : {"weight", "bias"})
      if (rest.size() == from.size() + 1 + wb.size() && rest.starts_with(from) && rest[from.size()] == '.' &&
          rest.ends_with(wb))
        return cat(to, ".", wb);
  return "";
}

std::string resnet_name(std::string_view rest) {
  return rename(rest, {{"norm1", "norm1"}, {"conv1", "conv1"}, {"norm2", "norm2"}, {"conv2", "conv2"},
                       {"nin_shortcut", "conv_shortcut"}});
}

// A tensor of encoder.down.<level>.block.<block>, encoder.down.<level>.downsample, and the decoder's up.
struct LevelTensor {
  bool encoder;
  int level, block;  // block -1: the level's down- or upsampler
  std::string rest;
  const TensorView* tensor;
};

}  // namespace

TensorSet map_ldm_vae(const LdmComponent& c) {
  TensorSet set(c.label());
  const auto reject = [&](const TensorView* t, std::string_view expected) {
    fail(c.label(), ": tensor ", quote(t->name), ": ", expected);
  };
  std::vector<LevelTensor> in_levels;
  std::map<bool, std::set<int>> levels;               // by encoder: the level indices
  std::map<std::pair<bool, int>, std::set<int>> blocks;  // by (encoder, level): the ResNet indices
  for (const TensorView* t : c.tensors) {
    const std::string_view rel = std::string_view(t->name).substr(c.prefix.size());
    const std::vector<std::string_view> p = split_name(rel);
    const bool encoder = p[0] == "encoder";
    std::string name;
    if (p.size() == 2 && (p[0] == "quant_conv" || p[0] == "post_quant_conv")) {
      name = rename(rel, {{p[0], p[0]}});
    } else if (p.size() == 3 && (encoder || p[0] == "decoder")) {
      name = rename(join_name(std::span(p).subspan(1)), {{"conv_in", "conv_in"}, {"norm_out", "conv_norm_out"}, {"conv_out", "conv_out"}});
      if (!name.empty()) name = cat(p[0], ".", name);
    } else if (p.size() > 3 && (encoder || p[0] == "decoder") && p[1] == "mid") {
      const std::string rest = join_name(std::span(p).subspan(3));
      if (p[2] == "block_1" || p[2] == "block_2") {
        name = resnet_name(rest);
        if (!name.empty()) name = cat(p[0], ".mid_block.resnets.", p[2] == "block_1" ? 0 : 1, ".", name);
      } else if (p[2] == "attn_1") {
        name = rename(rest, {{"norm", "group_norm"}, {"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}, {"proj_out", "to_out.0"}});
        if (!name.empty()) name = cat(p[0], ".mid_block.attentions.0.", name);
      }
    } else if (p.size() > 4 && (encoder ? p[1] == "down" : p[0] == "decoder" && p[1] == "up") && name_index(p[2]) >= 0) {
      const int level = name_index(p[2]);
      const std::string_view sampler = encoder ? "downsample" : "upsample";
      if (p[3] == "block" && name_index(p[4]) >= 0 && p.size() > 5) {
        in_levels.push_back({encoder, level, name_index(p[4]), join_name(std::span(p).subspan(5)), t});
      } else if (p[3] == sampler && p.size() == 6 && p[4] == "conv" && (p[5] == "weight" || p[5] == "bias")) {
        in_levels.push_back({encoder, level, -1, join_name(std::span(p).subspan(4)), t});
      } else {
        reject(t, cat("expected ", p[0], ".", p[1], ".N.block.M or ", p[0], ".", p[1], ".N.", sampler, ".conv"));
      }
      levels[encoder].insert(level);
      if (in_levels.back().block >= 0) blocks[{encoder, level}].insert(in_levels.back().block);
      continue;
    }
    if (name.empty())
      reject(t, "not a tensor of the original VAE layout (encoder, decoder, quant_conv, post_quant_conv)");
    // The mid-block attention's projections are 1x1 convs in the original, linear layers in diffusers.
    const bool conv_projection = name.find(".mid_block.attentions.0.to_") != std::string::npos &&
                                 name.ends_with(".weight") && t->shape.size() == 4 && t->shape[2] == 1 && t->shape[3] == 1;
    set.add(name, conv_projection ? reshaped(*t, {t->shape[0], t->shape[1]}) : *t, t->name, c.file);
  }

  // Levels and blocks by their rank among the indices present: the encoder's in order, the decoder's in the
  // reverse order (up.0 is the last to run, at full resolution: diffusers' last up block).
  const auto rank = [](const std::set<int>& s, int v) { return int(std::distance(s.begin(), s.find(v))); };
  for (const LevelTensor& x : in_levels) {
    const std::set<int>& ls = levels[x.encoder];
    const int level = x.encoder ? rank(ls, x.level) : int(ls.size()) - 1 - rank(ls, x.level);
    const std::string module = cat(x.encoder ? "encoder.down_blocks." : "decoder.up_blocks.", level);
    std::string name;
    if (x.block < 0) {
      name = cat(module, x.encoder ? ".downsamplers.0." : ".upsamplers.0.", x.rest);
    } else {
      name = resnet_name(x.rest);
      if (name.empty()) reject(x.tensor, "not a ResNet's (norm1, conv1, norm2, conv2, nin_shortcut)");
      name = cat(module, ".resnets.", rank(blocks[{x.encoder, x.level}], x.block), ".", name);
    }
    set.add(name, *x.tensor, x.tensor->name, c.file);
  }
  return set;
}

std::string infer_vae_config(const TensorSet& vae, int sample_size, bool sdxl) {
  const auto count = [&](const auto& name_of) {
    int n = 0;
    while (vae.find(name_of(n))) ++n;
    return n;
  };
  const int levels = count([](int l) { return cat("encoder.down_blocks.", l, ".resnets.0.conv1.weight"); });
  if (levels == 0) fail(vae.label(), ": no VAE encoder ResNet (first_stage_model.encoder.down.0.block.0.conv1.weight)");
  std::vector<int64_t> channels;
  for (int l = 0; l < levels; ++l)
    channels.push_back(vae.get_rank(cat("encoder.down_blocks.", l, ".resnets.0.conv1.weight"), 4).shape[0]);
  nlohmann::json config = {
      {"_class_name", "AutoencoderKL"},
      {"in_channels", vae.get_rank("encoder.conv_in.weight", 4).shape[1]},
      {"out_channels", vae.get_rank("decoder.conv_out.weight", 4).shape[0]},
      {"down_block_types", std::vector<std::string>(size_t(levels), "DownEncoderBlock2D")},
      {"up_block_types", std::vector<std::string>(size_t(levels), "UpDecoderBlock2D")},
      {"block_out_channels", channels},
      {"layers_per_block", count([](int j) { return cat("encoder.down_blocks.0.resnets.", j, ".conv1.weight"); })},
      {"act_fn", "silu"},
      {"latent_channels", vae.get_rank("decoder.conv_in.weight", 4).shape[1]},
      {"norm_num_groups", 32},  // the original's Normalize(): GroupNorm(32)
      {"sample_size", sample_size},
      // Not in the shapes: SD 1.x and 2.x scale latents by 0.18215, SDXL by 0.13025 (their configs' scale_factor).
      {"scaling_factor", sdxl ? 0.13025 : 0.18215},
      {"mid_block_add_attention", vae.find("encoder.mid_block.attentions.0.to_q.weight") != nullptr},
      {"use_quant_conv", vae.find("quant_conv.weight") != nullptr},
      {"use_post_quant_conv", vae.find("post_quant_conv.weight") != nullptr},
  };
  if (sdxl) config["force_upcast"] = true;  // its decoder overflows in fp16 (diffusers' SDXL VAE config)
  return config.dump(2);
}

}  // namespace rtvd
