#include "pipeline/models/autoencoder_tiny.h"

#include "base/error.h"

namespace rtvd {

namespace {

constexpr int kImageChannels = 3;

std::string layer(const char* part, int n) { return cat(part, ".layers.", n); }

}  // namespace

AutoencoderTinyBuilder::AutoencoderTinyBuilder(const AutoencoderTinyConfig& cfg, WeightStore& weights, Graph& graph,
                                               std::vector<Op>& ops, int act_bytes, int batch)
    : GraphEmitter(weights, graph, act_bytes), cfg_(cfg) {
  batch_ = batch;
  ops_ = &ops;
  tag_ = "taesd";
}

// Shape comments are NHWC, for one image of the batch (n images: n of each): c = the width of every level (64 for TAESD), Z latent channels, L levels,
// f = 2^(L-1) pixels per latent (8). Level i of the encoder works at (H/2^i, W/2^i), of the decoder at
// (h 2^i, w 2^i).

// diffusers' AutoencoderTinyBlock with as many channels out as in (its skip the identity):
// x (1, h, w, c) -> relu(conv.4(relu(conv.2(relu(conv.0 x)))) + x).
AutoencoderTinyBuilder::Act4 AutoencoderTinyBuilder::block(const std::string& prefix, const Act4& x) {
  ConvArgs c0 = conv_args(prefix + ".conv.0", x.c, x.c, 3);
  c0.act = Activation::Relu;
  const Act4 h0 = conv(prefix + ".conv.0", x, c0);  // (1, h, w, c)
  ConvArgs c2 = conv_args(prefix + ".conv.2", x.c, x.c, 3);
  c2.act = Activation::Relu;
  const Act4 h2 = conv(prefix + ".conv.2", h0, c2);  // (1, h, w, c)
  ConvArgs c4 = conv_args(prefix + ".conv.4", x.c, x.c, 3);
  c4.residual = x.t;
  c4.act = Activation::Relu;
  c4.act_after_residual = true;  // the block's fuse: ReLU of the sum
  return conv(prefix + ".conv.4", h2, c4);  // (1, h, w, c)
}

// diffusers' EncoderTiny on x (1, H, W, 3) in [-1, 1], then the sampler's scaling.
Ref AutoencoderTinyBuilder::encode(Ref image, int height, int width) {
  const int f = cfg_.latent.pixels_per_latent, L = cfg_.levels(), Z = cfg_.latent.channels;
  if (height <= 0 || width <= 0 || height % f || width % f)
    fail("TAESD encode: image ", width, "x", height, ": width and height must be positive multiples of ", f,
         " (pixels per latent)");
  const float s = cfg_.latent.scaling_factor, shift = cfg_.latent.shift_factor;
  const auto& ch = cfg_.encoder_block_out_channels;

  // TAESD works on images in [0, 1]: (x + 1) / 2, an op of its own, as the first conv zero-pads its result.
  Act4 x = scale_activation("encoder.to_unit", {image, height, width, kImageChannels}, 0.5f, 0.5f,
                            Activation::None, 1.0f);  // (1, H, W, 3)
  int n = 0;  // the index in encoder.layers
  for (int i = 0; i < L; ++i) {
    const std::string p = layer("encoder", n++);
    if (i == 0) {
      x = conv(p, x, conv_args(p, ch[0], kImageChannels, 3));  // (1, H, W, c)
    } else {
      ConvArgs down = conv_args(p, ch[i], x.c, 3, /*with_bias=*/false);
      down.stride = 2;
      x = conv(p, x, down);  // (1, H/2^i, W/2^i, c)
    }
    for (int b = 0; b < cfg_.num_encoder_blocks[i]; ++b) x = block(layer("encoder", n++), x);  // (1, H/2^i, W/2^i, c)
  }
  // The last conv, its output as the sampler takes it: (z - shift) * scale = conv * scale + (b - shift) * scale.
  const std::string p = layer("encoder", n);
  ConvArgs out = conv_args(p, Z, x.c, 3, /*with_bias=*/false);
  out.scale = constant(p + ".latent_scale", Z, s);
  out.bias = weights_.get(p + ".bias.scaled", Elem::F32, [&] {
    std::vector<float> b = weights_.read(p + ".bias", {Z});
    for (float& v : b) v = (v - shift) * s;
    return WeightTensor::floats({Z}, b);
  });
  return conv(p, x, out).t;  // (1, H/f, W/f, Z)
}

// diffusers' DecoderTiny of latent / scaling_factor + shift_factor, as its SD pipelines call it.
Ref AutoencoderTinyBuilder::decode(Ref latent, int h, int w) {
  if (h <= 0 || w <= 0) fail("TAESD decode: latent ", w, "x", h, ": width and height must be positive");
  const int L = cfg_.levels(), Z = cfg_.latent.channels;
  const float s = cfg_.latent.scaling_factor, shift = cfg_.latent.shift_factor;
  const auto& ch = cfg_.decoder_block_out_channels;

  // The soft clamp 3 tanh(z / 3) of z = latent / s + shift, in one op: 3 tanh(latent / (3 s) + shift / 3).
  Act4 x = scale_activation("decoder.clamp", {latent, h, w, Z}, 1.0f / (3.0f * s), shift / 3.0f, Activation::Tanh,
                            3.0f);  // (1, h, w, Z)
  ConvArgs first = conv_args(layer("decoder", 0), ch[0], Z, 3);
  first.act = Activation::Relu;             // decoder.layers.1
  x = conv(layer("decoder", 0), x, first);  // (1, h, w, c)
  int n = 2;  // the index in decoder.layers
  for (int i = 0; i < L; ++i) {
    for (int b = 0; b < cfg_.num_decoder_blocks[i]; ++b) x = block(layer("decoder", n++), x);  // (1, h 2^i, w 2^i, c)
    if (i < L - 1) {
      x = upsample2x(layer("decoder", n++), x);  // (1, h 2^(i+1), w 2^(i+1), c), nearest
      const std::string p = layer("decoder", n++);
      x = conv(p, x, conv_args(p, ch[i], x.c, 3, /*with_bias=*/false));  // (1, h 2^(i+1), w 2^(i+1), c)
    } else {
      // The image from [0, 1] to [-1, 1], x * 2 - 1, folded into the last conv: conv * 2 + (2 b - 1).
      const std::string p = layer("decoder", n);
      ConvArgs last = conv_args(p, kImageChannels, x.c, 3, /*with_bias=*/false);
      last.scale = constant(p + ".image_scale", kImageChannels, 2.0f);
      last.bias = weights_.get(p + ".bias.image", Elem::F32, [&] {
        std::vector<float> b = weights_.read(p + ".bias", {kImageChannels});
        for (float& v : b) v = 2.0f * v - 1.0f;
        return WeightTensor::floats({kImageChannels}, b);
      });
      x = conv(p, x, last);  // (1, H, W, 3)
    }
  }
  return x.t;
}

std::vector<TensorSpec> autoencoder_tiny_parameters(const AutoencoderTinyConfig& cfg, DType dtype) {
  std::vector<TensorSpec> out;
  const int L = cfg.levels(), Z = cfg.latent.channels;
  const auto conv = [&](const std::string& name, int o, int i, bool bias) {
    out.push_back({name + ".weight", dtype, {o, i, 3, 3}});
    if (bias) out.push_back({name + ".bias", dtype, {o}});
  };
  const auto block = [&](const std::string& p, int c) {
    for (const char* part : {".conv.0", ".conv.2", ".conv.4"}) conv(p + part, c, c, true);
  };
  const auto& enc = cfg.encoder_block_out_channels;
  int n = 0;
  for (int i = 0; i < L; ++i) {
    conv(layer("encoder", n++), enc[i], i == 0 ? kImageChannels : enc[i], i == 0);
    for (int b = 0; b < cfg.num_encoder_blocks[i]; ++b) block(layer("encoder", n++), enc[i]);
  }
  conv(layer("encoder", n), Z, enc[L - 1], true);
  const auto& dec = cfg.decoder_block_out_channels;
  conv(layer("decoder", 0), dec[0], Z, true);
  n = 2;
  for (int i = 0; i < L; ++i) {
    for (int b = 0; b < cfg.num_decoder_blocks[i]; ++b) block(layer("decoder", n++), dec[i]);
    if (i < L - 1) ++n;  // the upsampling has no parameters
    conv(layer("decoder", n++), i < L - 1 ? dec[i] : kImageChannels, dec[i], i == L - 1);
  }
  return out;
}

}  // namespace rtvd
