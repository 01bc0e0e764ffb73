#include "pipeline/models/controlnet.h"

#include <cmath>

#include "base/error.h"

namespace rtvd {

ControlNetBuilder::ControlNetBuilder(const ControlNetConfig& cfg, WeightStore& weights, Graph& graph, int batch,
                                     int act_bytes, std::string weight_prefix)
    : UNetBuilder(cfg.encoder, weights, graph, batch, act_bytes, true), net_(cfg) {
  weight_prefix_ = std::move(weight_prefix);
  if (cfg.global_pool_conditions)
    fail(cfg.encoder.name, ": key 'global_pool_conditions': residuals averaged over the image (shuffle "
         "ControlNets) are not supported by rtvd: expected false, got true");
}

// diffusers' ControlNetConditioningEmbedding: image (n, f h, f w, cc) -> (n, h, w, c0), f = 2^(B-1), B entries
// e_0 .. e_(B-1) of conditioning_embedding_out_channels. Every conv but the last is followed by SiLU.
ControlNetBuilder::Act4 ControlNetBuilder::conditioning_embedding(Ref image, int h, int w) {
  const std::vector<int>& e = net_.conditioning_embedding_out_channels;
  const int f = net_.image_factor(), c0 = cfg_.block_out_channels[0];
  const std::string p = "controlnet_cond_embedding";
  ConvArgs in = conv_args(p + ".conv_in", e[0], net_.conditioning_channels, 3);
  in.act = Activation::Silu;
  Act4 x = conv(p + ".conv_in", {image, f * h, f * w, net_.conditioning_channels}, in);  // (n, f h, f w, e_0)
  for (size_t i = 0; i + 1 < e.size(); ++i) {
    const std::string same = cat(p, ".blocks.", 2 * i), down = cat(p, ".blocks.", 2 * i + 1);
    ConvArgs a = conv_args(same, e[i], e[i], 3);
    a.act = Activation::Silu;
    x = conv(same, x, a);  // (n, f h / 2^i, f w / 2^i, e_i)
    ConvArgs b = conv_args(down, e[i + 1], e[i], 3);
    b.stride = 2;
    b.act = Activation::Silu;
    x = conv(down, x, b);  // (n, f h / 2^(i+1), f w / 2^(i+1), e_(i+1))
  }
  return conv(p + ".conv_out", x, conv_args(p + ".conv_out", c0, e.back(), 3));  // (n, h, w, c0)
}

// scale * (1x1 conv `name` of x): (n, h_x, w_x, c_x).
Ref ControlNetBuilder::residual(const std::string& name, const Act4& x, float scale) {
  ConvArgs a = conv_args(name, x.c, x.c, 1);
  const Act4 zero_conv = conv(name, x, a);  // (n, h_x, w_x, c_x)
  return scale_activation(name + ".scaled", zero_conv, scale, 0.0f, Activation::None, 1.0f).t;
}

ControlNetBuilder::Act4 ControlNetBuilder::embedded_input(Ref x_in, Ref image, int h, int w) {
  const int f = net_.image_factor();
  const std::vector<int64_t> image_shape{batch_, int64_t(f) * h, int64_t(f) * w, net_.conditioning_channels};
  if (image.kind != Ref::Tensor || g_.tensors.at(image.id).shape != image_shape)
    fail("internal: the control image of ", cfg_.name, " is not a (", batch_, ", ", f * h, ", ", f * w, ", ",
         net_.conditioning_channels, ") tensor");
  const Act4 embedding = conditioning_embedding(image, h, w);  // (n, h, w, c0)
  return input(x_in, h, w, embedding.t);                       // (n, h, w, c0): conv_in(x) + embedding
}

std::vector<Ref> ControlNetBuilder::skip_residuals(const std::vector<Act4>& skips, float scale, bool guess_mode) {
  const std::vector<float> factors = guess_mode ? guess_mode_scales(residual_count()) : std::vector<float>(residual_count(), 1.0f);
  std::vector<Ref> out;
  for (size_t i = 0; i < skips.size(); ++i) {  // (n, h_i, w_i, c_i) each
    out.push_back(residual(cat("controlnet_down_blocks.", i), skips[i], scale * factors.at(i)));
    scaled_ops_.emplace_back(ops_->size() - 1, factors.at(i));
  }
  return out;
}

// diffusers' ControlNetModel.forward: shapes as UNetBuilder::forward's.
ControlResiduals ControlNetBuilder::forward(Ref x_in, Ref image, int h, int w, const StepConditioning& cond,
                                            const CrossContext& cross, const std::string& tag, float scale,
                                            bool guess_mode) {
  ops_ = &g_.frame;
  tag_ = tag;
  scaled_ops_.clear();
  Act4 x = embedded_input(x_in, image, h, w);  // (n, h, w, c0)
  std::vector<Act4> skips{x};
  x = encode(x, skips, cond, cross);  // (n, h/2^(L-1), w/2^(L-1), c_(L-1))
  if (skips.size() + 1 != residual_count())
    fail("internal: ", cfg_.name, " made ", skips.size(), " skips, its residuals count ", residual_count());
  ControlResiduals out;
  out.down = skip_residuals(skips, scale, guess_mode);
  const float mid_factor = guess_mode ? guess_mode_scales(residual_count()).back() : 1.0f;
  out.mid = residual("controlnet_mid_block", x, scale * mid_factor);  // (n, h/2^(L-1), w/2^(L-1), c_(L-1))
  scaled_ops_.emplace_back(ops_->size() - 1, mid_factor);
  return out;
}

// The top level of forward(): conv_in, the embedding, down_blocks.0's ResNets and attentions (not its downsampler).
ControlResiduals ControlNetBuilder::forward_cached(Ref x_in, Ref image, int h, int w, const StepConditioning& cond,
                                                   const CrossContext& cross, const std::string& tag, float scale,
                                                   bool guess_mode) {
  ops_ = &g_.cached_frame;
  tag_ = tag;
  scaled_ops_.clear();
  const Act4 x = embedded_input(x_in, image, h, w);  // (n, h, w, c0)
  std::vector<Act4> skips{x};
  down_level(0, x, skips, cond, cross);  // (n, h, w, c0) each
  ControlResiduals out;
  out.down = skip_residuals(skips, scale, guess_mode);
  return out;
}

std::vector<float> guess_mode_scales(size_t n) {
  std::vector<float> out;
  for (size_t i = 0; i < n; ++i) out.push_back(float(std::pow(10.0, -1.0 + (n > 1 ? double(i) / double(n - 1) : 1.0))));
  return out;
}

std::vector<TensorSpec> controlnet_parameters(const ControlNetConfig& cfg) {
  const ModelConfig& u = cfg.encoder;
  std::vector<TensorSpec> out;
  for (TensorSpec& s : unet_parameters(u))  // the encoder's: everything before the up blocks
    if (!s.name.starts_with("up_blocks.") && !s.name.starts_with("conv_norm_out.") && !s.name.starts_with("conv_out."))
      out.push_back(std::move(s));
  auto conv = [&](const std::string& name, int out_c, int in_c, int k) {
    out.push_back({name + ".weight", u.dtype, {out_c, in_c, k, k}});
    out.push_back({name + ".bias", u.dtype, {out_c}});
  };
  const std::vector<int>& e = cfg.conditioning_embedding_out_channels;
  const std::string p = "controlnet_cond_embedding";
  conv(p + ".conv_in", e[0], cfg.conditioning_channels, 3);
  for (size_t i = 0; i + 1 < e.size(); ++i) {
    conv(cat(p, ".blocks.", 2 * i), e[i], e[i], 3);
    conv(cat(p, ".blocks.", 2 * i + 1), e[i + 1], e[i], 3);
  }
  conv(p + ".conv_out", u.block_out_channels[0], e.back(), 3);
  // One zero conv per skip: conv_in's, each down ResNet's (or attention's), each downsampler's.
  int index = 0;
  conv(cat("controlnet_down_blocks.", index++), u.block_out_channels[0], u.block_out_channels[0], 1);
  for (int i = 0; i < u.levels(); ++i) {
    const int c = u.block_out_channels[i];
    for (int j = 0; j < u.layers_per_block + (i < u.levels() - 1 ? 1 : 0); ++j)
      conv(cat("controlnet_down_blocks.", index++), c, c, 1);
  }
  const int mid = u.block_out_channels.back();
  conv("controlnet_mid_block", mid, mid, 1);
  return out;
}

}  // namespace rtvd
