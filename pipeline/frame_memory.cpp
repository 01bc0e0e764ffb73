#include "pipeline/frame_memory.h"

#include <algorithm>
#include <initializer_list>

#include "base/checked_math.h"
#include "base/error.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_gemm_chunks.h"
#include "pipeline/graph/memory_budget.h"
#include "pipeline/models/autoencoder.h"
#include "pipeline/models/controlnet.h"
#include "pipeline/models/model.h"
#include "pipeline/models/unet.h"

namespace rtvd {

namespace {

// Channels of the autoencoder's activations at the image's own size: the first level's, the widest there.
int widest_image_channels(const AutoencoderConfig& c) {
  if (c.tiny()) {
    const auto& t = std::get<AutoencoderTinyConfig>(c.model);
    return std::max(t.encoder_block_out_channels.front(), t.decoder_block_out_channels.back());
  }
  return std::get<AutoencoderKLConfig>(c.model).block_out_channels.front();
}

// The scratch of the VAE's mid-block attention (one head of the deepest level's width over every latent) as
// the backend runs it: on the GPU (fp16 activations) the GEMM path's, which flash kernels can't replace at
// head dim 512 (1024²: 264 MiB); on the CPU the reference's block of scores.
int64_t mid_attention_workspace(const AutoencoderConfig& c, int64_t latent_h, int64_t latent_w, int act_bytes,
                                const std::string& what) {
  const auto* kl = std::get_if<AutoencoderKLConfig>(&c.model);
  if (!kl || !kl->mid_block_attention) return 0;
  const int64_t tokens = checked_mul(latent_h, latent_w, what);
  if (tokens > INT32_MAX) fail(what, ": ", tokens, " latent tokens, expected at most ", INT32_MAX);
  AttentionParams p;
  p.batch = p.heads = 1;
  p.head_dim = kl->block_out_channels.back();
  p.q_len = p.kv_len = int(tokens);
  return int64_t(act_bytes == 2 ? attention_gemm_chunks(p).workspace_bytes : attention_cpu_workspace_bytes(p));
}

}  // namespace

int64_t FrameMemory::total() const {
  return checked_add(checked_add(weights, activations, "frame memory"), workspace, "frame memory");
}

std::string FrameMemory::describe() const {
  return cat("weights ", byte_size(weights), ", activations ", byte_size(activations),
             workspace ? cat(", workspace ", byte_size(workspace)) : "");
}

FrameMemory frame_memory(const Model& model, int width, int height, int batch, int steps, int act_bytes) {
  const ModelConfig& cfg = model.config;
  const std::string what = cat(cfg.name, " at ", width, "x", height);
  FrameMemory m;
  // Vectors (biases, norm scales) are left out: folded BatchNorm keeps two of its four.
  const auto add_weights = [&](const std::vector<TensorSpec>& specs) {
    for (const TensorSpec& t : specs)
      if (t.shape.size() >= 2) m.weights = checked_add(m.weights, checked_numel(t.shape, what, act_bytes), what);
  };
  add_weights(unet_parameters(cfg));
  if (model.autoencoder) add_weights(autoencoder_parameters(*model.autoencoder, DType::F32));
  for (const ModelControlNet& net : model.controlnets) add_weights(controlnet_parameters(net.config));

  int64_t& a = m.activations;
  const auto add = [&](std::initializer_list<int64_t> factors) {
    int64_t n = 1;
    for (int64_t f : factors) n = checked_mul(n, f, what);
    a = checked_add(a, n, what);
  };
  const int f = model.pixels_per_latent();
  const int64_t h0 = std::max(1, height / f), w0 = std::max(1, width / f), C = cfg.in_channels;
  add({h0, w0, C, 4});                                 // sample, fp32
  add({height, width, model.image_channels(), 4});     // previous_frame, fp32
  add({height, width, 4});                             // rgba
  if (model.autoencoder) {
    // The decoder's widest activations, three alive at once (a ResNet's input, its hidden state and its
    // output), and the decoded image.
    add({3, height, width, widest_image_channels(*model.autoencoder), act_bytes});
    add({height, width, 3, act_bytes});
    m.workspace = mid_attention_workspace(*model.autoencoder, h0, w0, act_bytes, what);
  }

  add({batch, h0, w0, C, act_bytes});  // model_input, read by every step
  if (cfg.cross_attention_dim > 0) add({batch, cfg.context_length, cfg.cross_attention_dim, act_bytes});
  // SDXL: the pooled text embedding with the embedded time ids (add_embeds), and the added embedding.
  if (cfg.text_time()) add({batch, cfg.projection_class_embeddings_input_dim + cfg.time_embed_dim(), act_bytes});
  int64_t film = 0;  // FiLM floats per image and step: every ResNet's bias, and its scale with BatchNorm
  for (const auto& resnet : unet_resnets(cfg)) film += int64_t(resnet.second) * (cfg.norm == NormKind::Batch ? 2 : 1);
  add({steps, batch, film, 4});
  // The skips (diffusers' down_block_res_samples) are all alive when the up path starts: conv_in's output,
  // every down ResNet's (or transformer's) output and every downsampler's.
  const auto& ch = cfg.block_out_channels;
  const auto add_skips = [&] {
    int64_t h = h0, w = w0;
    add({batch, h, w, ch[0], act_bytes});
    for (int i = 0; i < cfg.levels(); ++i) {
      add({cfg.layers_per_block, batch, h, w, ch[i], act_bytes});
      if (i + 1 == cfg.levels()) break;
      h = (h + 1) / 2, w = (w + 1) / 2;  // a 3x3 stride-2 conv with padding 1
      add({batch, h, w, ch[i], act_bytes});
    }
  };
  add_skips();
  // ControlNets: their residuals, one per skip and the mid block's (alive while the U-Net runs), their control
  // images (the host's fp32 and the nets' activations) and their FiLM per step.
  if (!model.controlnets.empty()) {
    add_skips();
    add({batch, h0 >> (cfg.levels() - 1), w0 >> (cfg.levels() - 1), ch.back(), act_bytes});
  }
  for (const ModelControlNet& net : model.controlnets) {
    add({height, width, net.config.conditioning_channels, 4});
    add({batch, height, width, net.config.conditioning_channels, act_bytes});
    int64_t net_film = 0;
    for (const auto& resnet : unet_resnets(net.config.encoder, true))
      net_film += int64_t(resnet.second) * (net.config.encoder.norm == NormKind::Batch ? 2 : 1);
    add({steps, batch, net_film, 4});
  }
  return m;
}

}  // namespace rtvd
