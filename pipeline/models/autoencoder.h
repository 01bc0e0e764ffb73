// What the frame plan asks of an SD autoencoder, whichever it is (AutoencoderKL, autoencoder_kl.h; or
// AutoencoderTiny, autoencoder_tiny.h): the ops that encode an image into the sampler's latent and decode one
// back, appended to an op list of a Graph, for a batch of images (the frames a stream batch encodes at once). Weights come from a WeightStore under diffusers'
// names (encoder.*, decoder.*, quant_conv.*, post_quant_conv.*).
#pragma once
#include <memory>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/model_files/autoencoder_config.h"
#include "pipeline/model_files/safetensors.h"

namespace rtvd {

class AutoencoderBuilder {
 public:
  virtual ~AutoencoderBuilder() = default;

  // Shapes for one image of the batch (n images: n of each).
  // image (1, height, width, 3) activations in [-1, 1] -> latent (1, height/f, width/f, latent channels),
  // f = pixels_per_latent: the autoencoder's latent (the KL Gaussian's mean, or TAESD's latents) minus
  // shift_factor, times scaling_factor, as diffusers' img2img pipeline hands it to the sampler. height and
  // width must be multiples of f.
  virtual Ref encode(Ref image, int height, int width) = 0;
  // latent (1, h, w, latent channels) as the sampler leaves it (scaled) -> image (1, f h, f w, 3) activations,
  // in [-1, 1] where the model is good (not clamped: diffusers' image processor clamps when it converts).
  virtual Ref decode(Ref latent, int h, int w) = 0;
};

// The builder of cfg's class, appending to ops (a list of graph's: its frame ops). act_bytes: the size of
// one activation element on the backend (4 CPU, 2 CUDA), for the cost model; batch: images per encode and decode.
std::unique_ptr<AutoencoderBuilder> make_autoencoder_builder(const AutoencoderConfig& cfg, WeightStore& weights,
                                                             Graph& graph, std::vector<Op>& ops, int act_bytes,
                                                             int batch = 1);

// Every parameter of cfg's architecture: diffusers' name, dtype and PyTorch shape. A checkpoint holds exactly
// these, except that older AutoencoderKL checkpoints store the mid-block attention's to_q, to_k, to_v and
// to_out.0 weights as 1x1 convs (C, C, 1, 1) where this lists (C, C): the builders take either.
std::vector<TensorSpec> autoencoder_parameters(const AutoencoderConfig& cfg, DType dtype);

}  // namespace rtvd
