// Builds diffusers' AutoencoderTiny (TAESD) into a Graph, under its names: EncoderTiny (encoder.layers.N:
// 3x3 convs, stride 2 at the start of every level but the first, and AutoencoderTinyBlocks) and DecoderTiny
// (decoder.layers.N: its soft clamp, a conv and ReLU, blocks, nearest 2x upsampling and convs). A block,
// relu(conv(relu(conv(relu(conv x)))) + x), is three convs with ReLU in their epilogues, the last after the
// residual. The decoder's final x * 2 - 1 folds into its last conv's epilogue, the latent scaling into the
// encoder's last conv and the decoder's clamp.
#pragma once
#include <string>
#include <vector>

#include "pipeline/models/autoencoder.h"
#include "pipeline/models/graph_emitter.h"

namespace rtvd {

class AutoencoderTinyBuilder : public AutoencoderBuilder, GraphEmitter {
 public:
  AutoencoderTinyBuilder(const AutoencoderTinyConfig& cfg, WeightStore& weights, Graph& graph, std::vector<Op>& ops,
                         int act_bytes, int batch = 1);

  Ref encode(Ref image, int height, int width) override;
  Ref decode(Ref latent, int h, int w) override;

 private:
  AutoencoderTinyConfig cfg_;

  Act4 block(const std::string& prefix, const Act4& x);
};

std::vector<TensorSpec> autoencoder_tiny_parameters(const AutoencoderTinyConfig& cfg, DType dtype);

}  // namespace rtvd
