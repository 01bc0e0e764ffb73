// The U-Net of an original-layout checkpoint (openaimodel.py's UNetModel as SD's checkpoints name it) and
// diffusers' UNet2DConditionModel: the renaming both ways, and the config read off the shapes.
#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/dotted_name.h"
#include "pipeline/model_files/ldm_layout.h"

namespace rtvd {

namespace {

constexpr std::array<std::string_view, 2> kWeightBias = {"weight", "bias"};

// Modules outside the blocks, both ways.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kOuterModules = {{
    {"time_embed.0", "time_embedding.linear_1"},
    {"time_embed.2", "time_embedding.linear_2"},
    {"label_emb.0.0", "add_embedding.linear_1"},  // SDXL's added embedding: Linear, SiLU, Linear
    {"label_emb.0.2", "add_embedding.linear_2"},
    {"input_blocks.0.0", "conv_in"},
    {"out.0", "conv_norm_out"},
    {"out.2", "conv_out"},
}};

// A ResBlock's modules: in_layers (GroupNorm, SiLU, conv), emb_layers (SiLU, Linear), out_layers (GroupNorm,
// SiLU, Dropout, conv), and the 1x1 skip conv where the channels change.
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kResnetModules = {{
    {"in_layers.0", "norm1"},
    {"in_layers.2", "conv1"},
    {"emb_layers.1", "time_emb_proj"},
    {"out_layers.0", "norm2"},
    {"out_layers.3", "conv2"},
    {"skip_connection", "conv_shortcut"},
}};

// "<module>.weight|bias" renamed by table (from: 0 original -> diffusers, 1 the reverse); "" if not in it.
template <size_t N>
std::string rename(std::string_view rest, const std::array<std::pair<std::string_view, std::string_view>, N>& table,
                   int from) {
  for (const auto& entry : table) {
    const std::string_view a = from == 0 ? entry.first : entry.second, b = from == 0 ? entry.second : entry.first;
    for (std::string_view wb : kWeightBias)
      if (rest.size() == a.size() + 1 + wb.size() && rest.starts_with(a) && rest[a.size()] == '.' && rest.ends_with(wb))
        return cat(b, ".", wb);
  }
  return "";
}

// The SpatialTransformer's names are diffusers' Transformer2DModel's: whether rest is one of them.
bool is_transformer_name(std::string_view rest) {
  static const std::set<std::string, std::less<>> outer = {"norm.weight",    "norm.bias",     "proj_in.weight",
                                                           "proj_in.bias",   "proj_out.weight", "proj_out.bias"};
  static const std::set<std::string, std::less<>> block = [] {
    std::set<std::string, std::less<>> s;
    for (const char* attn : {"attn1", "attn2"}) {
      for (const char* p : {"to_q", "to_k", "to_v"}) s.insert(cat(attn, ".", p, ".weight"));
      for (std::string_view wb : kWeightBias) s.insert(cat(attn, ".to_out.0.", wb));
    }
    for (const char* m : {"norm1", "norm2", "norm3", "ff.net.0.proj", "ff.net.2"})
      for (std::string_view wb : kWeightBias) s.insert(cat(m, ".", wb));
    return s;
  }();
  if (outer.contains(rest)) return true;
  const std::vector<std::string_view> parts = split_name(rest);
  return parts.size() > 2 && parts[0] == "transformer_blocks" && name_index(parts[1]) >= 0 &&
         block.contains(join_name(std::span(parts).subspan(2)));
}

// A tensor inside input_blocks.<i>.<sub>, middle_block.<sub> or output_blocks.<i>.<sub>: rest follows sub.
struct BlockTensor {
  int sub;
  std::string rest;
  const TensorView* tensor;
};

}  // namespace

TensorSet map_ldm_unet(const LdmComponent& c) {
  TensorSet set(c.label());
  const auto add = [&](const std::string& name, const TensorView* t) { set.add(name, *t, t->name, c.file); };
  const auto reject = [&](const TensorView* t, std::string_view expected) {
    fail(c.label(), ": tensor ", quote(t->name), ": ", expected);
  };
  std::map<int, std::vector<BlockTensor>> input, middle, output;
  for (const TensorView* t : c.tensors) {
    const std::string_view rel = std::string_view(t->name).substr(c.prefix.size());
    if (const std::string outer = rename(rel, kOuterModules, 0); !outer.empty()) {
      add(outer, t);
      continue;
    }
    const std::vector<std::string_view> parts = split_name(rel);
    const bool in_middle = parts[0] == "middle_block";
    auto* blocks = parts[0] == "input_blocks" ? &input : in_middle ? &middle : parts[0] == "output_blocks" ? &output : nullptr;
    const size_t rest_at = in_middle ? 2 : 3;
    const int i = parts.size() > 1 ? name_index(parts[1]) : -1;
    const int sub = in_middle ? i : parts.size() > 2 ? name_index(parts[2]) : -1;
    if (!blocks || i < 0 || sub < 0 || parts.size() <= rest_at || (blocks == &input && i == 0))
      reject(t, "not a tensor of the original U-Net layout (time_embed, label_emb, input_blocks, middle_block, output_blocks, out)");
    (*blocks)[i].push_back({sub, join_name(std::span(parts).subspan(rest_at)), t});
  }

  const auto resnet = [&](const BlockTensor& b, const std::string& module) {
    const std::string name = rename(b.rest, kResnetModules, 0);
    if (name.empty()) reject(b.tensor, "not a ResNet's (in_layers, emb_layers, out_layers, skip_connection)");
    add(cat(module, ".", name), b.tensor);
  };
  const auto transformer = [&](const BlockTensor& b, const std::string& module) {
    if (!is_transformer_name(b.rest)) reject(b.tensor, "not a spatial transformer's (norm, proj_in, transformer_blocks, proj_out)");
    add(cat(module, ".", b.rest), b.tensor);
  };

  // The down path: a block is a ResNet with or without a transformer, or a level's downsampler.
  int level = 0, j = 0;
  for (const auto& [i, block] : input) {
    if (std::ranges::any_of(block, [](const BlockTensor& b) { return b.sub == 0 && b.rest.starts_with("op."); })) {
      for (const BlockTensor& b : block) {
        if (b.sub != 0 || (b.rest != "op.weight" && b.rest != "op.bias"))
          reject(b.tensor, "beside a downsampler (op), expected nothing else in its block");
        add(cat("down_blocks.", level, ".downsamplers.0.conv.", b.rest.substr(3)), b.tensor);
      }
      ++level;
      j = 0;
      continue;
    }
    for (const BlockTensor& b : block) {
      if (b.sub == 0) resnet(b, cat("down_blocks.", level, ".resnets.", j));
      else if (b.sub == 1) transformer(b, cat("down_blocks.", level, ".attentions.", j));
      else reject(b.tensor, "expected a ResNet (.0) and a transformer (.1) in a block of the down path");
    }
    if (std::ranges::none_of(block, [](const BlockTensor& b) { return b.sub == 0; }))
      reject(block.front().tensor, "a transformer without the ResNet before it (input_blocks.N.0)");
    ++j;
  }
  // The mid block: ResNet, transformer, ResNet.
  for (const auto& [m, block] : middle)
    for (const BlockTensor& b : block) {
      if (m == 0 || m == 2) resnet(b, cat("mid_block.resnets.", m / 2));
      else if (m == 1) transformer(b, "mid_block.attentions.0");
      else reject(b.tensor, "expected middle_block.0 to 2 (ResNet, transformer, ResNet)");
    }
  // The up path: a ResNet with or without a transformer, and after a level's last one its upsampler (.1, or
  // .2 after a transformer).
  level = 0, j = 0;
  for (const auto& [i, block] : output) {
    bool has_resnet = false, has_upsampler = false;
    for (const BlockTensor& b : block) {
      if (b.sub == 0) {
        resnet(b, cat("up_blocks.", level, ".resnets.", j));
        has_resnet = true;
      } else if ((b.sub == 1 || b.sub == 2) && (b.rest == "conv.weight" || b.rest == "conv.bias")) {
        add(cat("up_blocks.", level, ".upsamplers.0.", b.rest), b.tensor);
        has_upsampler = true;
      } else if (b.sub == 1) {
        transformer(b, cat("up_blocks.", level, ".attentions.", j));
      } else {
        reject(b.tensor, "expected a ResNet (.0), a transformer (.1) and an upsampler (.1 or .2) in a block of the up path");
      }
    }
    if (!has_resnet && !has_upsampler) reject(block.front().tensor, "a transformer without the ResNet before it (output_blocks.N.0)");
    if (has_resnet) ++j;
    if (has_upsampler) {
      ++level;
      j = 0;
    }
  }
  return set;
}

std::map<std::string, std::string> ldm_unet_names(const std::vector<std::string>& diffusers_names) {
  // Layers per block: the down path's first level's ResNets; the up path's levels with transformers, whose
  // upsampler comes after them (.2) rather than after the ResNet (.1).
  std::set<int> first_level_resnets, up_levels_with_attention;
  for (const std::string& n : diffusers_names) {
    const std::vector<std::string_view> p = split_name(n);
    if (p.size() > 3 && p[0] == "down_blocks" && p[1] == "0" && p[2] == "resnets" && name_index(p[3]) >= 0)
      first_level_resnets.insert(name_index(p[3]));
    if (p.size() > 2 && p[0] == "up_blocks" && p[2] == "attentions") up_levels_with_attention.insert(name_index(p[1]));
  }
  const int per_level = int(first_level_resnets.size()) + 1;  // input_blocks per level, with the downsampler

  std::map<std::string, std::string> out;
  for (const std::string& n : diffusers_names) {
    if (const std::string outer = rename(n, kOuterModules, 1); !outer.empty()) {
      out[n] = outer;
      continue;
    }
    const std::vector<std::string_view> p = split_name(n);
    if (p.size() < 4) continue;
    const int a = name_index(p[1]), b = name_index(p[3]);
    const std::string rest = join_name(std::span(p).subspan(4));
    std::string ldm;
    if (p[0] == "mid_block" && p[1] == "resnets" && (p[2] == "0" || p[2] == "1")) {
      ldm = rename(join_name(std::span(p).subspan(3)), kResnetModules, 1);
      if (!ldm.empty()) ldm = cat("middle_block.", p[2] == "0" ? 0 : 2, ".", ldm);
    } else if (p[0] == "mid_block" && p[1] == "attentions" && p[2] == "0") {
      ldm = cat("middle_block.1.", join_name(std::span(p).subspan(3)));
    } else if (a < 0 || b < 0) {
      continue;
    } else if (p[0] == "down_blocks" && p[2] == "resnets") {
      ldm = rename(rest, kResnetModules, 1);
      if (!ldm.empty()) ldm = cat("input_blocks.", 1 + a * per_level + b, ".0.", ldm);
    } else if (p[0] == "down_blocks" && p[2] == "attentions") {
      ldm = cat("input_blocks.", 1 + a * per_level + b, ".1.", rest);
    } else if (p[0] == "down_blocks" && p[2] == "downsamplers" && rest.starts_with("conv.")) {
      ldm = cat("input_blocks.", (a + 1) * per_level, ".0.op.", rest.substr(5));
    } else if (p[0] == "up_blocks" && p[2] == "resnets") {
      ldm = rename(rest, kResnetModules, 1);
      if (!ldm.empty()) ldm = cat("output_blocks.", a * per_level + b, ".0.", ldm);
    } else if (p[0] == "up_blocks" && p[2] == "attentions") {
      ldm = cat("output_blocks.", a * per_level + b, ".1.", rest);
    } else if (p[0] == "up_blocks" && p[2] == "upsamplers") {
      ldm = cat("output_blocks.", a * per_level + per_level - 1, ".", up_levels_with_attention.contains(a) ? 2 : 1, ".", rest);
    }
    if (!ldm.empty()) out[n] = ldm;
  }
  return out;
}

namespace {

const std::string kMidCrossKey = "mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight";

}  // namespace

std::string unet_architecture(const TensorSet& unet, std::string_view config_to_give) {
  const int64_t context = unet.get_rank(kMidCrossKey, 2).shape[1];
  if (context == 768) return "SD 1.x";
  if (context == 1024) return "SD 2.x";
  if (context == 2048) return "SDXL";
  fail(unet.label(), ": tensor ", unet.describe(kMidCrossKey), ": cross-attention width ", context,
       " fits no known architecture (SD 1.x: 768, with 8 heads; SD 2.x: 1024, SDXL: 2048, with heads of 64), and the heads "
       "cannot be read off shapes: give ", config_to_give);
}

nlohmann::json infer_unet_down_config(const TensorSet& unet, int64_t pooled_width) {
  const auto count = [&](const auto& name_of) {
    int n = 0;
    while (unet.find(name_of(n))) ++n;
    return n;
  };
  const int levels = count([](int l) { return cat("down_blocks.", l, ".resnets.0.conv1.weight"); });
  const int layers = count([](int j) { return cat("down_blocks.0.resnets.", j, ".conv1.weight"); });
  if (levels == 0) fail(unet.label(), ": no ResNet of the down path (input_blocks.1.0.in_layers.2.weight)");
  std::vector<int64_t> channels;
  std::vector<std::string> down;
  for (int l = 0; l < levels; ++l) {
    channels.push_back(unet.get_rank(cat("down_blocks.", l, ".resnets.0.conv1.weight"), 4).shape[0]);
    down.push_back(unet.find(cat("down_blocks.", l, ".attentions.0.proj_in.weight")) ? "CrossAttnDownBlock2D" : "DownBlock2D");
  }

  // Heads are not in the shapes (diffusers' legacy naming: attention_head_dim holds head counts).
  const std::string architecture = unet_architecture(unet);
  nlohmann::json heads = 8;
  if (architecture != "SD 1.x") {
    heads = nlohmann::json::array();
    for (int64_t c : channels) {
      if (c % 64 != 0)
        fail(unet.label(), ": level channels ", c, " are not a multiple of ", architecture, "'s head dim 64: no known architecture");
      heads.push_back(c / 64);
    }
  }
  const std::string mid = "mid_block.attentions.0.";
  const TensorView* proj_in = unet.find(mid + "proj_in.weight");
  nlohmann::json config = {
      {"in_channels", unet.get_rank("conv_in.weight", 4).shape[1]},
      {"block_out_channels", channels},
      {"layers_per_block", layers},
      {"down_block_types", down},
      {"norm_num_groups", 32},  // the original U-Net's normalization(): GroupNorm32
      {"cross_attention_dim", unet.get_rank(kMidCrossKey, 2).shape[1]},
      {"attention_head_dim", heads},
      {"use_linear_projection", proj_in && proj_in->shape.size() == 2},  // SD 2.x: Linear, SD 1.x: 1x1 conv
      {"transformer_layers_per_block", count([&](int k) { return cat(mid, "transformer_blocks.", k, ".norm1.weight"); })},
  };
  if (architecture == "SDXL") {
    // Depth by level ([1, 2, 10] in SDXL; 1 where a level has no transformer, as diffusers writes it) and the
    // added embedding's widths.
    std::vector<int> depth;
    for (int l = 0; l < levels; ++l)
      depth.push_back(std::max(1, count([&](int k) { return cat("down_blocks.", l, ".attentions.0.transformer_blocks.", k, ".norm1.weight"); })));
    config["transformer_layers_per_block"] = depth;
    const std::string add = "add_embedding.linear_1.weight";
    const int64_t input = unet.get_rank(add, 2).shape[1];
    if (input <= pooled_width || (input - pooled_width) % 6 != 0)
      fail(unet.label(), ": tensor ", unet.describe(add), ": input width ", input, " is not the pooled text embedding's ",
           pooled_width, " and six time ids of one width (SDXL: 1280 + 6 x 256)");
    config["addition_embed_type"] = "text_time";
    config["addition_time_embed_dim"] = (input - pooled_width) / 6;
    config["projection_class_embeddings_input_dim"] = input;
  }
  return config;
}

std::string infer_unet_config(const TensorSet& unet, int sample_size, int64_t pooled_width) {
  nlohmann::json config = infer_unet_down_config(unet, pooled_width);
  std::vector<std::string> up;
  const nlohmann::json& down = config.at("down_block_types");
  for (auto type = down.rbegin(); type != down.rend(); ++type)
    up.push_back(*type == "CrossAttnDownBlock2D" ? "CrossAttnUpBlock2D" : "UpBlock2D");
  config["_class_name"] = "UNet2DConditionModel";
  config["sample_size"] = sample_size;
  config["out_channels"] = unet.get_rank("conv_out.weight", 4).shape[0];
  config["up_block_types"] = up;
  return config.dump(2);
}

}  // namespace rtvd
