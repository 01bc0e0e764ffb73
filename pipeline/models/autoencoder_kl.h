// Builds diffusers' AutoencoderKL (the SD VAE) into a Graph, under its names: the Encoder (conv_in,
// DownEncoderBlock2Ds of ResNets and a Downsample2D, the UNetMidBlock2D with its one-head attention, GroupNorm +
// SiLU + conv_out) with quant_conv, and post_quant_conv with the Decoder (conv_in, the mid block,
// UpDecoderBlock2Ds of ResNets and an Upsample2D, GroupNorm + SiLU + conv_out). Each GroupNorm+SiLU runs in
// its conv's prologue; the latent scaling folds into quant_conv's and post_quant_conv's epilogues, and only the
// Gaussian's mean is computed of quant_conv.
#pragma once
#include <string>
#include <vector>

#include "pipeline/models/autoencoder.h"
#include "pipeline/models/graph_emitter.h"

namespace rtvd {

class AutoencoderKLBuilder : public AutoencoderBuilder, GraphEmitter {
 public:
  AutoencoderKLBuilder(const AutoencoderKLConfig& cfg, WeightStore& weights, Graph& graph, std::vector<Op>& ops,
                       int act_bytes, int batch = 1);

  Ref encode(Ref image, int height, int width) override;
  Ref decode(Ref latent, int h, int w) override;

 private:
  AutoencoderKLConfig cfg_;

  // Weights.
  ConvArgs normed_conv(const std::string& name, const std::string& norm, int out, int in);
  const TensorView& projection_view(const std::string& name, int c);
  ConvArgs latent_mean_conv(const std::string& name, int in, int k);
  Act4 unscaled_conv(const std::string& name, const Act4& z, int out, int k);

  // Blocks, mirroring the PyTorch modules.
  Act4 resnet(const std::string& prefix, const Act4& x, int out);
  Act4 attention(const std::string& prefix, const Act4& x);
  Act4 mid_block(const std::string& prefix, const Act4& x);
};

std::vector<TensorSpec> autoencoder_kl_parameters(const AutoencoderKLConfig& cfg, DType dtype);

}  // namespace rtvd
