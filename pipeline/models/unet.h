// Builds the U-Net of a ModelConfig into a Graph: diffusers' UNet2DConditionModel layout and names
// (docs/model-format.md), with BatchNorm folded into conv epilogues, FiLM as per-image scale/bias, fused
// QKV and fused K/V projections, and every time projection of the network computed by one linear.
#pragma once
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/models/graph_emitter.h"

namespace rtvd {

// Per-step conditioning of every ResNet: FiLM scale (null for GroupNorm blocks) and bias, (batch, C) fp32.
struct StepConditioning {
  std::map<std::string, std::pair<Ref, Ref>> film;
};

// K/V of every cross-attention, from the context: (batch * context_length, 2C). Independent of the step.
struct CrossContext {
  std::map<std::string, Ref> kv;
};

// What ControlNets add to the U-Net (diffusers' down_block_additional_residuals and
// mid_block_additional_residual): down[i] (batch, h_i, w_i, c_i) to skip i, in the order of diffusers'
// down_block_res_samples (conv_in's output, then each down ResNet's or attention's and each downsampler's), and
// mid (batch, h/2^(L-1), w/2^(L-1), c_(L-1)) to the mid block's output.
// (A cached frame's, ControlNetBuilder::forward_cached: the top level's skips alone, no mid.)
struct ControlResiduals {
  std::vector<Ref> down;
  Ref mid;
};

class UNetBuilder : protected GraphEmitter {
 public:
  // act_bytes: size of one activation element on the backend (4 CPU, 2 CUDA), for the cost model.
  UNetBuilder(const ModelConfig& cfg, WeightStore& weights, Graph& graph, int batch, int act_bytes)
      : UNetBuilder(cfg, weights, graph, batch, act_bytes, false) {}

  // Setup ops: time (+ class, + added) embedding at time t in [0, 1] (embedded as t * timestep_scale: rectified
  // flow's t, or a DDPM timestep / 1000 for diffusers' U-Nets) and the FiLM of every ResNet.
  // class_ids: I32 (batch) tensor, or none for models without classes; added: added_embedding()'s, or none
  // for models without.
  StepConditioning conditioning(double t, Ref class_ids, const std::string& tag, Ref added = {}) {
    return conditioning(std::vector<double>{t}, class_ids, tag, added);
  }
  // The same for a batch of groups at times of their own (a stream batch: each group of frames at its own
  // step): group g, rows [g batch / groups, (g + 1) batch / groups), at t[g]. batch must divide evenly.
  StepConditioning conditioning(const std::vector<double>& t, Ref class_ids, const std::string& tag, Ref added = {});
  // Setup ops of a text_time model (SDXL), independent of the step: diffusers' get_aug_embed, the (batch, T)
  // term that conditioning() adds to the time embedding, from text_embeds (Act (batch, text_embeds_dim()), the
  // pooled text embedding) and time_ids (F32 (batch, 6): original height, width, crop top, left, target
  // height, width).
  Ref added_embedding(Ref text_embeds, Ref time_ids);
  // Setup ops: cross-attention K/V from the context (Act (batch, context_length, cross_attention_dim)).
  CrossContext cross_context(Ref context);

  // Frame ops: the velocity (batch, h, w, out_channels) for x (batch, h, w, in_channels). deep (if given):
  // set to the feature that enters the last up block, up_blocks.(L-1) at the top level (batch, h, w, c1),
  // c1 = block_out_channels[1]: what forward_cached() reads in place of the deeper levels. residuals: each
  // ControlNet's, added in turn to the skips the up blocks read and to the mid block's output, in place, one op per
  // net and skip (so that no net's ops read another's, and the nets can run side by side); without, the graph has
  // no op for them.
  Ref forward(Ref x, int h, int w, const StepConditioning& cond, const CrossContext& cross, const std::string& tag,
              Ref* deep = nullptr, std::span<const ControlResiduals> residuals = {});
  // Cached frame ops (Graph::cached_frame), DeepCache's shallow forward: conv_in, down_blocks.0's ResNets and
  // attentions (the top level's skips), up_blocks.(L-1) on `deep` (a feature forward() set on the same
  // conditioning) with those skips, conv_out. The same output as forward() where deep is that of the same x.
  // residuals: each ControlNet's for the top level's skips alone (ControlNetBuilder::forward_cached), added to
  // them. For 2 levels or more.
  Ref forward_cached(Ref x, Ref deep, int h, int w, const StepConditioning& cond, const CrossContext& cross,
                     const std::string& tag, std::span<const ControlResiduals> residuals = {});
  // The ops of the last forward() or forward_cached() that add the residuals, in place into the skips and the mid
  // block's output: one range of its op list per ControlResiduals, in order. With those ops off (Op::off) the up
  // blocks read what the U-Net without that net reads.
  const std::vector<OpRange>& residual_adds() const { return residual_adds_; }

 protected:
  // encoder_only: the builder of a ControlNet (controlnet.h), whose checkpoint is the U-Net's encoder alone:
  // conditioning() and cross_context() make the FiLM and K/V of the down and mid blocks only.
  UNetBuilder(const ModelConfig& cfg, WeightStore& weights, Graph& graph, int batch, int act_bytes, bool encoder_only);

  const ModelConfig& cfg_;
  const bool encoder_only_;

  // Weights.
  Ref time_projection_weight();
  Ref time_projection_bias();
  std::pair<Ref, Ref> folded_batch_norm(const std::string& prefix, int c);

  Ref attention(const std::string& layer, Ref q, Ref k, Ref v, int q_len, int kv_len, int c, int q_stride,
                int kv_stride);

  // Blocks, mirroring the PyTorch modules.
  Act4 resnet(const std::string& prefix, const Act4& x, int out, const StepConditioning& cond);
  Act4 transformer(const std::string& prefix, const Act4& x, int depth, const CrossContext& cross);
  int resnet_proj_width(int out) const;

  // The U-Net's parts, in forward order: forward() runs them all, forward_cached() the top level's, a
  // ControlNet input() and encode(). input(): conv_in, plus residual (batch, h, w, c0) if given.
  Act4 input(Ref x, int h, int w, Ref residual = {});
  // down_blocks (each level's ResNets and attentions, then its downsampler) and mid_block on conv_in's output x,
  // each skip pushed onto skips (which holds x): the mid block's output.
  Act4 encode(Act4 x, std::vector<Act4>& skips, const StepConditioning& cond, const CrossContext& cross);
  Act4 down_level(int i, Act4 x, std::vector<Act4>& skips, const StepConditioning& cond, const CrossContext& cross);
  Act4 up_level(int i, Act4 x, std::vector<Act4>& skips, const StepConditioning& cond, const CrossContext& cross);
  Ref output(const Act4& x);

 private:
  std::vector<OpRange> residual_adds_;

  // Each net's residuals added in place to the skips and to mid (none: a cached pass's, which has no mid),
  // after the down path has read them; sets residual_adds_.
  void add_residuals(std::span<const ControlResiduals> residuals, const std::vector<Act4>& skips, const Act4* mid);
};

// Every ResNet of the architecture in forward order: (parameter prefix, output channels); encoder_only: those
// of the down and mid blocks.
std::vector<std::pair<std::string, int>> unet_resnets(const ModelConfig& cfg, bool encoder_only = false);

// Every parameter of the architecture: checkpoint key (diffusers' for SD-class configs), the config's
// dtype and the PyTorch shape, in the order of docs/model-format.md. A checkpoint holds exactly these.
std::vector<TensorSpec> unet_parameters(const ModelConfig& cfg);

}  // namespace rtvd
