#include "pipeline/models/autoencoder_kl.h"

#include <cmath>

#include "base/error.h"

namespace rtvd {

namespace {

// diffusers' Encoder and Decoder build every GroupNorm of the VAE (ResNets, the attention, conv_norm_out)
// with eps 1e-6.
constexpr float kNormEps = 1e-6f;
constexpr int kImageChannels = 3;

}  // namespace

AutoencoderKLBuilder::AutoencoderKLBuilder(const AutoencoderKLConfig& cfg, WeightStore& weights, Graph& graph,
                                           std::vector<Op>& ops, int act_bytes, int batch)
    : GraphEmitter(weights, graph, act_bytes), cfg_(cfg) {
  batch_ = batch;
  ops_ = &ops;
  tag_ = "vae";
}

// ---- weights ----

// A 3x3 conv whose input is silu(GroupNorm `norm` of x): the norm's statistics come from the op
// group_norm_stats() emits, its affine and the SiLU are the conv's prologue.
AutoencoderKLBuilder::ConvArgs AutoencoderKLBuilder::normed_conv(const std::string& name, const std::string& norm,
                                                                 int out, int in) {
  ConvArgs a = conv_args(name, out, in, 3);
  a.gn_gamma = vector(norm + ".weight", in);
  a.gn_beta = vector(norm + ".bias", in);
  a.gn_groups = cfg_.norm_num_groups;
  return a;
}

// A mid-block attention projection: Linear (C, C), or in older checkpoints a 1x1 conv (C, C, 1, 1), the same
// matrix either way.
const TensorView& AutoencoderKLBuilder::projection_view(const std::string& name, int c) {
  const TensorView* t = weights_.checkpoint().find(name);
  if (t && t->shape.size() == 4) return weights_.view(name, {c, c, 1, 1});
  return weights_.view(name, {c, c});
}

// The conv `name` (k x k, 2Z outputs: the Gaussian's mean, then its log-variance) cut to its first Z output
// channels, the mean, which the sampler takes as (mean - shift_factor) * scaling_factor: the scale and shift
// fold into the epilogue. The mean's weight rows lead the (2Z, in, k, k) tensor, so they are a view of it.
AutoencoderKLBuilder::ConvArgs AutoencoderKLBuilder::latent_mean_conv(const std::string& name, int in, int k) {
  const int Z = cfg_.latent.channels;
  const float s = cfg_.latent.scaling_factor, shift = cfg_.latent.shift_factor;
  ConvArgs a;
  a.w = weights_.get(name + ".weight.mean", Elem::Act, [&] {
    TensorView mean = weights_.view(name + ".weight", {2 * Z, in, k, k});
    mean.shape[0] = Z;
    mean.bytes /= 2;
    return WeightTensor::stacked({Z, k, k, in}, {mean}, true);
  });
  a.scale = constant(name + ".mean_scale", Z, s);
  a.bias = weights_.get(name + ".bias.mean", Elem::F32, [&] {
    std::vector<float> b = weights_.read(name + ".bias", {2 * Z});
    b.resize(size_t(Z));
    for (float& v : b) v = (v - shift) * s;  // y = conv * s + (b - shift) s = (conv + b - shift) s
    return WeightTensor::floats({Z}, b);
  });
  a.out = Z;
  a.k = k;
  a.pad = k / 2;
  return a;
}

// The conv `name` (k x k, with bias) of z / scaling_factor + shift_factor, the latent as the decoder takes it.
// 1/s folds into the epilogue (the conv is linear and its zero padding stays zero); the shift folds into the
// bias only where no tap is padding (1x1: post_quant_conv), so a 3x3 conv after a nonzero shift gets an op of
// its own first.
AutoencoderKLBuilder::Act4 AutoencoderKLBuilder::unscaled_conv(const std::string& name, const Act4& z, int out, int k) {
  const float s = cfg_.latent.scaling_factor, shift = cfg_.latent.shift_factor;
  const bool fold_shift = k == 1 && shift != 0.0f;
  ConvArgs a = conv_args(name, out, z.c, k, /*with_bias=*/!fold_shift);
  if (k != 1 && shift != 0.0f) {
    // (1, h, w, Z): z / s + shift
    const Act4 unscaled = scale_activation(name + ".unscale", z, 1.0f / s, shift, Activation::None, 1.0f);
    return conv(name, unscaled, a);  // (1, h, w, out)
  }
  a.scale = constant(name + ".unscale", out, 1.0f / s);
  if (fold_shift) {
    a.bias = weights_.get(name + ".bias.unshifted", Elem::F32, [&] {
      // W (z / s + shift) + b = (W z) / s + (b + shift * the row sums of W)
      const std::vector<float> w = weights_.read(name + ".weight", {out, z.c, 1, 1});
      std::vector<float> b = weights_.read(name + ".bias", {out});
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < z.c; ++i) b[o] += shift * w[size_t(o) * z.c + i];
      return WeightTensor::floats({out}, b);
    });
  }
  return conv(name, z, a);  // (1, h, w, out)
}

// ---- blocks ----
// Shape comments are NHWC, for one image of the batch (n images: n of each): h x w the block's input at its level, c its channels; token tensors are
// (h*w, c). For SD's VAE at 512x512: levels of 512/256/128/64 pixels, c 128/256/512/512, latents 64x64x4.

// diffusers' ResnetBlock2D without a time embedding: x (1, h, w, c_in) -> (1, h, w, out).
AutoencoderKLBuilder::Act4 AutoencoderKLBuilder::resnet(const std::string& prefix, const Act4& x, int out) {
  Ref shortcut = x.t;
  if (x.c != out) {
    const ConvArgs sc = conv_args(prefix + ".conv_shortcut", out, x.c, 1);
    shortcut = conv(prefix + ".conv_shortcut", x, sc).t;  // (1, h, w, out)
  }
  ConvArgs c1 = normed_conv(prefix + ".conv1", prefix + ".norm1", out, x.c);
  c1.gn_stats = group_norm_stats(prefix + ".norm1", x, cfg_.norm_num_groups, kNormEps);  // (1, groups, 2): mean, rstd
  const Act4 h = conv(prefix + ".conv1", x, c1);  // (1, h, w, out): silu(norm1 x) on the way in
  ConvArgs c2 = normed_conv(prefix + ".conv2", prefix + ".norm2", out, out);
  c2.gn_stats = group_norm_stats(prefix + ".norm2", h, cfg_.norm_num_groups, kNormEps);  // (1, groups, 2)
  c2.residual = shortcut;
  return conv(prefix + ".conv2", h, c2);  // (1, h, w, out) + shortcut
}

// diffusers' Attention as the VAE's mid block builds it: GroupNorm, one head of dim C (q, k and v with
// biases, fused into one projection here), to_out, plus the input. x (1, h, w, C) -> (1, h, w, C).
AutoencoderKLBuilder::Act4 AutoencoderKLBuilder::attention(const std::string& prefix, const Act4& x) {
  const int C = x.c, seq = x.h * x.w, rows = batch_ * seq;
  Ref wqkv = weights_.get(prefix + ".to_qkv.weight", Elem::Act, [&] {
    WeightTensor t = WeightTensor::stacked({3 * C, C}, {});
    for (const char* name : {".to_q.weight", ".to_k.weight", ".to_v.weight"})
      t.parts.push_back(projection_view(prefix + name, C));
    return t;
  });
  Ref bqkv = weights_.get(prefix + ".to_qkv.bias", Elem::F32, [&] {
    WeightTensor t = WeightTensor::floats({3 * C}, {});
    for (const char* name : {".to_q.bias", ".to_k.bias", ".to_v.bias"}) {
      const std::vector<float> b = weights_.read(prefix + name, {C});
      t.values.insert(t.values.end(), b.begin(), b.end());
    }
    return t;
  });
  Ref wout = weights_.get(prefix + ".to_out.0.weight", Elem::Act, [&] {
    return WeightTensor::stacked({C, C}, {projection_view(prefix + ".to_out.0.weight", C)});
  });

  Ref normed = group_norm(prefix + ".group_norm", x, cfg_.norm_num_groups, kNormEps);  // (1, h, w, C)
  Ref qkv = linear(prefix + ".to_qkv", normed, rows, C, 3 * C, wqkv, bqkv, {});  // (h*w, 3C): Q | K | V
  Ref a = GraphEmitter::attention(prefix, qkv, qkv.at(C), qkv.at(2 * C), batch_, /*heads=*/1, seq, seq, C, 3 * C,
                                  3 * C);  // (h*w, C), one head of dim C
  Ref out = linear(prefix + ".to_out.0", a, rows, C, C, wout, vector(prefix + ".to_out.0.bias", C),
                   x.t);  // (1, h, w, C) + x
  return {out, x.h, x.w, C};
}

// diffusers' UNetMidBlock2D without a time embedding: ResNet, attention (unless mid_block_add_attention is
// off), ResNet. x (1, h, w, C) -> (1, h, w, C).
AutoencoderKLBuilder::Act4 AutoencoderKLBuilder::mid_block(const std::string& prefix, const Act4& x) {
  Act4 h = resnet(prefix + ".resnets.0", x, x.c);                               // (1, h, w, C)
  if (cfg_.mid_block_attention) h = attention(prefix + ".attentions.0", h);  // (1, h, w, C)
  return resnet(prefix + ".resnets.1", h, x.c);                                 // (1, h, w, C)
}

// ---- encode and decode ----
// Level l (0 at the image) works at (H/2^l, W/2^l) with c_l = block_out_channels[l] channels; L levels,
// f = 2^(L-1) pixels per latent, Z latent channels.

Ref AutoencoderKLBuilder::encode(Ref image, int height, int width) {
  const int f = cfg_.latent.pixels_per_latent, L = cfg_.levels(), Z = cfg_.latent.channels;
  if (height <= 0 || width <= 0 || height % f || width % f)
    fail("VAE encode: image ", width, "x", height, ": width and height must be positive multiples of ", f,
         " (pixels per latent)");
  const auto& ch = cfg_.block_out_channels;

  Act4 x = conv("encoder.conv_in", {image, height, width, kImageChannels},
                conv_args("encoder.conv_in", ch[0], kImageChannels, 3));  // (1, H, W, c0)
  for (int i = 0; i < L; ++i) {
    for (int j = 0; j < cfg_.layers_per_block; ++j)
      x = resnet(cat("encoder.down_blocks.", i, ".resnets.", j), x, ch[i]);  // (1, H/2^i, W/2^i, c_i)
    if (i < L - 1) {
      // Downsample2D: F.pad (0, 1, 0, 1), then a stride-2 conv without padding: zeros after the input only.
      const std::string p = cat("encoder.down_blocks.", i, ".downsamplers.0.conv");
      ConvArgs d = conv_args(p, ch[i], ch[i], 3);
      d.stride = 2;
      d.pad = 0;
      d.pad_end = 1;
      x = conv(p, x, d);  // (1, H/2^(i+1), W/2^(i+1), c_i)
    }
  }
  x = mid_block("encoder.mid_block", x);  // (1, H/f, W/f, c_{L-1})

  // conv_out of silu(conv_norm_out x): the Gaussian's parameters, mean | log-variance, then quant_conv's
  // mean rows; without quant_conv, conv_out's own mean rows.
  const Ref stats = group_norm_stats("encoder.conv_norm_out", x, cfg_.norm_num_groups, kNormEps);  // (1, groups, 2)
  if (!cfg_.use_quant_conv) {
    ConvArgs mean = latent_mean_conv("encoder.conv_out", ch[L - 1], 3);
    mean.gn_stats = stats;
    mean.gn_gamma = vector("encoder.conv_norm_out.weight", ch[L - 1]);
    mean.gn_beta = vector("encoder.conv_norm_out.bias", ch[L - 1]);
    mean.gn_groups = cfg_.norm_num_groups;
    return conv("encoder.conv_out", x, mean).t;  // (1, H/f, W/f, Z): (mean - shift) * scale
  }
  ConvArgs co = normed_conv("encoder.conv_out", "encoder.conv_norm_out", 2 * Z, ch[L - 1]);
  co.gn_stats = stats;
  const Act4 moments = conv("encoder.conv_out", x, co);  // (1, H/f, W/f, 2Z)
  // (1, H/f, W/f, Z): (mean - shift) * scale
  return conv("quant_conv", moments, latent_mean_conv("quant_conv", 2 * Z, 1)).t;
}

Ref AutoencoderKLBuilder::decode(Ref latent, int h, int w) {
  if (h <= 0 || w <= 0) fail("VAE decode: latent ", w, "x", h, ": width and height must be positive");
  const int L = cfg_.levels(), Z = cfg_.latent.channels;
  const auto& ch = cfg_.block_out_channels;

  Act4 x{latent, h, w, Z};  // (1, h, w, Z) scaled, as the sampler leaves it
  if (cfg_.use_post_quant_conv) {
    x = unscaled_conv("post_quant_conv", x, Z, 1);  // (1, h, w, Z) of z / scaling_factor + shift_factor
    x = conv("decoder.conv_in", x, conv_args("decoder.conv_in", ch[L - 1], Z, 3));  // (1, h, w, c_{L-1})
  } else {
    x = unscaled_conv("decoder.conv_in", x, ch[L - 1], 3);  // (1, h, w, c_{L-1})
  }
  x = mid_block("decoder.mid_block", x);  // (1, h, w, c_{L-1})

  // up_blocks.i: level l = L-1-i, layers_per_block + 1 ResNets, then Upsample2D but at the image.
  for (int i = 0; i < L; ++i) {
    const int level = L - 1 - i, out = ch[level];
    for (int j = 0; j <= cfg_.layers_per_block; ++j)
      x = resnet(cat("decoder.up_blocks.", i, ".resnets.", j), x, out);  // (1, h 2^i, w 2^i, c_l)
    if (i < L - 1) {
      const std::string p = cat("decoder.up_blocks.", i, ".upsamplers.0");
      const Act4 up = upsample2x(p + ".upsample", x);                         // (1, h 2^(i+1), w 2^(i+1), c_l), nearest
      x = conv(p + ".conv", up, conv_args(p + ".conv", out, out, 3));  // (1, h 2^(i+1), w 2^(i+1), c_l)
    }
  }
  ConvArgs co = normed_conv("decoder.conv_out", "decoder.conv_norm_out", kImageChannels, ch[0]);
  co.gn_stats = group_norm_stats("decoder.conv_norm_out", x, cfg_.norm_num_groups, kNormEps);  // (1, groups, 2)
  return conv("decoder.conv_out", x, co).t;  // (1, H, W, 3) of silu(conv_norm_out x)
}

// ---- parameters ----

std::vector<TensorSpec> autoencoder_kl_parameters(const AutoencoderKLConfig& cfg, DType dtype) {
  std::vector<TensorSpec> out;
  const int L = cfg.levels(), Z = cfg.latent.channels;
  const auto& ch = cfg.block_out_channels;
  const auto with_bias = [&](const std::string& name, std::vector<int64_t> weight_shape) {
    const int64_t n = weight_shape[0];
    out.push_back({name + ".weight", dtype, std::move(weight_shape)});
    out.push_back({name + ".bias", dtype, {n}});
  };
  const auto resnet = [&](const std::string& p, int in, int c) {
    with_bias(p + ".norm1", {in});
    with_bias(p + ".conv1", {c, in, 3, 3});
    with_bias(p + ".norm2", {c});
    with_bias(p + ".conv2", {c, c, 3, 3});
    if (in != c) with_bias(p + ".conv_shortcut", {c, in, 1, 1});
  };
  const auto mid_block = [&](const std::string& p, int c) {
    resnet(p + ".resnets.0", c, c);
    if (cfg.mid_block_attention) {
      const std::string a = p + ".attentions.0";
      with_bias(a + ".group_norm", {c});
      for (const char* proj : {".to_q", ".to_k", ".to_v", ".to_out.0"}) with_bias(a + proj, {c, c});
    }
    resnet(p + ".resnets.1", c, c);
  };

  with_bias("encoder.conv_in", {ch[0], kImageChannels, 3, 3});
  int h = ch[0];
  for (int i = 0; i < L; ++i) {
    for (int j = 0; j < cfg.layers_per_block; ++j) {
      resnet(cat("encoder.down_blocks.", i, ".resnets.", j), h, ch[i]);
      h = ch[i];
    }
    if (i < L - 1) with_bias(cat("encoder.down_blocks.", i, ".downsamplers.0.conv"), {h, h, 3, 3});
  }
  mid_block("encoder.mid_block", h);
  with_bias("encoder.conv_norm_out", {h});
  with_bias("encoder.conv_out", {2 * Z, h, 3, 3});

  with_bias("decoder.conv_in", {ch[L - 1], Z, 3, 3});
  h = ch[L - 1];
  mid_block("decoder.mid_block", h);
  for (int i = 0; i < L; ++i) {
    const int c = ch[L - 1 - i];
    for (int j = 0; j <= cfg.layers_per_block; ++j) {
      resnet(cat("decoder.up_blocks.", i, ".resnets.", j), h, c);
      h = c;
    }
    if (i < L - 1) with_bias(cat("decoder.up_blocks.", i, ".upsamplers.0.conv"), {c, c, 3, 3});
  }
  with_bias("decoder.conv_norm_out", {h});
  with_bias("decoder.conv_out", {kImageChannels, h, 3, 3});

  if (cfg.use_quant_conv) with_bias("quant_conv", {2 * Z, 2 * Z, 1, 1});
  if (cfg.use_post_quant_conv) with_bias("post_quant_conv", {Z, Z, 1, 1});
  return out;
}

}  // namespace rtvd
