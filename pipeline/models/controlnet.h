// Builds a ControlNet (diffusers' ControlNetModel, names as its checkpoint's) into a Graph with the U-Net's
// own emitters (UNetBuilder's: conv_in, the time embedding and FiLM, the down blocks and mid block, cross
// attention): conv_in(x) + controlnet_cond_embedding(image), the encoder, then one 1x1 zero convolution per
// skip (controlnet_down_blocks) and one for the mid block (controlnet_mid_block), each output multiplied by
// the conditioning scale: the residuals the U-Net adds (ControlResiduals, unet.h).
#pragma once
#include <string>
#include <vector>

#include "pipeline/model_files/diffusers_controlnet_config.h"
#include "pipeline/models/unet.h"

namespace rtvd {

class ControlNetBuilder : protected UNetBuilder {
 public:
  // weights holds the net's tensors under weight_prefix (TensorSet::add_all: "controlnet.0." beside the U-Net's,
  // whose names are the same), its ops' layers are named so too. Refuses global_pool_conditions (one line
  // naming the config's key). act_bytes as UNetBuilder's.
  ControlNetBuilder(const ControlNetConfig& cfg, WeightStore& weights, Graph& graph, int batch, int act_bytes,
                    std::string weight_prefix);

  // Setup ops, as the U-Net's, made from the ControlNet's own weights (its copy of the time embedding,
  // added embedding and cross-attention K/V).
  using UNetBuilder::added_embedding;
  using UNetBuilder::conditioning;
  using UNetBuilder::cross_context;

  // Frame ops: the residuals for x (batch, h, w, in_channels), the U-Net's input, and image (batch, f h, f w,
  // conditioning_channels), the control image in [0, 1], f = image_factor(); each multiplied by scale (in
  // guess mode by guess_mode_scales' too). Several nets' residuals are added by the U-Net (UNetBuilder::forward),
  // so that one net's ops never read another's.
  ControlResiduals forward(Ref x, Ref image, int h, int w, const StepConditioning& cond, const CrossContext& cross,
                           const std::string& tag, float scale, bool guess_mode = false);
  // The scaling ops (ScaleActivationOps, in_scale = scale x factor) that the last forward() or forward_cached()
  // emitted: (index in its op list, factor: guess mode's, else 1), so that a new scale can be set in place.
  const std::vector<std::pair<size_t, float>>& scaled_ops() const { return scaled_ops_; }

  // Cached frame ops (Graph::cached_frame), for the U-Net's forward_cached: the residuals of the top level's skips
  // alone (conv_in's and down_blocks.0's ResNets' and attentions'), the same as forward()'s first ones for the same
  // inputs; no mid.
  ControlResiduals forward_cached(Ref x, Ref image, int h, int w, const StepConditioning& cond,
                                  const CrossContext& cross, const std::string& tag, float scale,
                                  bool guess_mode = false);

 private:
  const ControlNetConfig& net_;
  std::vector<std::pair<size_t, float>> scaled_ops_;

  Act4 conditioning_embedding(Ref image, int h, int w);
  // conv_in(x) + the conditioning embedding of image: (n, h, w, c0), after checking image's shape.
  Act4 embedded_input(Ref x_in, Ref image, int h, int w);
  // Each skip's zero convolution times scale and, in guess mode, its factor of guess_mode_scales over every
  // residual of the net (its first ones: the top level's).
  std::vector<Ref> skip_residuals(const std::vector<Act4>& skips, float scale, bool guess_mode);
  // Every residual forward() makes: conv_in's, each level's ResNets', each downsampler's, the mid block's.
  size_t residual_count() const {
    const int L = cfg_.levels();
    return 1 + size_t(L) * size_t(cfg_.layers_per_block) + size_t(L - 1) + 1;
  }
  Ref residual(const std::string& name, const Act4& x, float scale);
};

// diffusers' guess mode (ControlNetModel.forward): the factors of the n residuals, the down ones in order then the
// mid block's, torch.logspace(-1, 0, n): from 0.1 for conv_in's up to 1 for the mid block's.
std::vector<float> guess_mode_scales(size_t n);

// Every parameter of the ControlNet: diffusers' ControlNetModel keys, the config's dtype, PyTorch shapes. A
// checkpoint holds exactly these.
std::vector<TensorSpec> controlnet_parameters(const ControlNetConfig& cfg);

}  // namespace rtvd
