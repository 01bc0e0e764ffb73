// The U-Net's checkpoint: every parameter's name (diffusers' keys) and shape for a config, and its ResNets.
#include "pipeline/models/unet.h"

#include "base/error.h"

namespace rtvd {

std::vector<std::pair<std::string, int>> unet_resnets(const ModelConfig& cfg, bool encoder_only) {
  std::vector<std::pair<std::string, int>> out;
  const int L = cfg.levels();
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < cfg.layers_per_block; ++j)
      out.emplace_back(cat("down_blocks.", i, ".resnets.", j), cfg.block_out_channels[i]);
  out.emplace_back("mid_block.resnets.0", cfg.block_out_channels[L - 1]);
  out.emplace_back("mid_block.resnets.1", cfg.block_out_channels[L - 1]);
  if (encoder_only) return out;
  for (int i = 0; i < L; ++i)
    for (int j = 0; j <= cfg.layers_per_block; ++j)
      out.emplace_back(cat("up_blocks.", i, ".resnets.", j), cfg.block_out_channels[L - 1 - i]);
  return out;
}

std::vector<TensorSpec> unet_parameters(const ModelConfig& cfg) {
  std::vector<TensorSpec> out;
  const int L = cfg.levels(), T = cfg.time_embed_dim(), D = cfg.cross_attention_dim;
  const auto& ch = cfg.block_out_channels;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) { out.push_back({name, cfg.dtype, std::move(shape)}); };
  auto with_bias = [&](const std::string& name, std::vector<int64_t> weight_shape) {
    const int64_t n = weight_shape[0];
    add(name + ".weight", std::move(weight_shape));
    add(name + ".bias", {n});
  };
  auto resnet = [&](const std::string& p, int in, int c) {
    if (cfg.norm == NormKind::Group) {
      with_bias(p + ".norm1", {in});
      with_bias(p + ".conv1", {c, in, 3, 3});
      with_bias(p + ".time_emb_proj", {c, T});
      with_bias(p + ".norm2", {c});
      with_bias(p + ".conv2", {c, c, 3, 3});
    } else {
      add(p + ".conv1.weight", {c, in, 3, 3});
      add(p + ".conv2.weight", {c, c, 3, 3});
      for (const char* norm : {".norm1", ".norm2"})
        for (const char* field : {".weight", ".bias", ".running_mean", ".running_var"}) add(p + norm + field, {c});
      with_bias(p + ".time_emb_proj", {2 * c, T});
    }
    if (in != c) with_bias(p + ".conv_shortcut", {c, in, 1, 1});
  };
  auto transformer = [&](const std::string& p, int c, int depth) {
    const std::vector<int64_t> proj = cfg.use_linear_projection ? std::vector<int64_t>{c, c} : std::vector<int64_t>{c, c, 1, 1};
    with_bias(p + ".norm", {c});
    with_bias(p + ".proj_in", proj);
    with_bias(p + ".proj_out", proj);
    for (int k = 0; k < depth; ++k) {
      const std::string b = cat(p, ".transformer_blocks.", k);
      for (const auto& [norm, attn, kv] : {std::tuple{".norm1", ".attn1", c}, std::tuple{".norm2", ".attn2", D}}) {
        if (kv == 0) continue;  // no cross-attention
        with_bias(b + norm, {c});
        add(b + attn + ".to_q.weight", {c, c});
        add(b + attn + ".to_k.weight", {c, kv});
        add(b + attn + ".to_v.weight", {c, kv});
        with_bias(b + attn + ".to_out.0", {c, c});
      }
      with_bias(b + ".norm3", {c});
      with_bias(b + ".ff.net.0.proj", {8 * c, c});
      with_bias(b + ".ff.net.2", {c, 4 * c});
    }
  };

  with_bias("time_embedding.linear_1", {T, ch[0]});
  with_bias("time_embedding.linear_2", {T, T});
  if (cfg.num_class_embeds > 0) add("class_embedding.weight", {cfg.num_class_embeds, T});
  if (cfg.text_time()) {
    with_bias("add_embedding.linear_1", {T, cfg.projection_class_embeddings_input_dim});
    with_bias("add_embedding.linear_2", {T, T});
  }
  with_bias("conv_in", {ch[0], cfg.in_channels, 3, 3});
  // The channel count h walks through the net; skips holds the channels of what the down path pushed.
  int h = ch[0];
  std::vector<int> skips{h};
  for (int i = 0; i < L; ++i) {
    for (int j = 0; j < cfg.layers_per_block; ++j) {
      resnet(cat("down_blocks.", i, ".resnets.", j), h, ch[i]);
      h = ch[i];
      if (cfg.attention_levels[i]) transformer(cat("down_blocks.", i, ".attentions.", j), h, cfg.transformer_depth(i));
      skips.push_back(h);
    }
    if (i < L - 1) {
      with_bias(cat("down_blocks.", i, ".downsamplers.0.conv"), {h, h, 3, 3});
      skips.push_back(h);
    }
  }
  resnet("mid_block.resnets.0", h, h);
  resnet("mid_block.resnets.1", h, h);
  if (cfg.mid_attention) transformer("mid_block.attentions.0", h, cfg.transformer_depth(L - 1));
  for (int i = 0; i < L; ++i) {
    const int level = L - 1 - i;
    for (int j = 0; j <= cfg.layers_per_block; ++j) {
      resnet(cat("up_blocks.", i, ".resnets.", j), h + skips.back(), ch[level]);
      skips.pop_back();
      h = ch[level];
      if (cfg.attention_levels[level]) transformer(cat("up_blocks.", i, ".attentions.", j), h, cfg.transformer_depth(level));
    }
    if (i < L - 1) with_bias(cat("up_blocks.", i, ".upsamplers.0.conv"), {h, h, 3, 3});
  }
  if (cfg.norm == NormKind::Group) with_bias("conv_norm_out", {ch[0]});
  with_bias("conv_out", {cfg.out_channels, ch[0], 3, 3});
  return out;
}

}  // namespace rtvd
