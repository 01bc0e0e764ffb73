// Builds transformers' CLIPTextModel into a Graph, under its own parameter names: token and position
// embeddings, pre-LayerNorm blocks of causal self-attention (one fused QKV projection) and an MLP, then the
// final LayerNorm; and CLIPTextModelWithProjection's text_embeds (SDXL's pooled embedding). Used by the text
// encoder (pipeline/text_encoder.h).
#pragma once
#include <string>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/model_files/clip_text_config.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/tensor_set.h"
#include "pipeline/models/graph_emitter.h"

namespace rtvd {

// A text encoder's config and checkpoint tensors, under transformers' CLIPTextModel names (with or without
// "text_model.", which transformers 5 leaves out), F16, BF16 or F32.
struct TextEncoderCheckpoint {
  ClipTextConfig config;
  TensorSet tensors;
};

// A diffusers text_encoder/ folder: config.json and model.safetensors (or model.fp16.safetensors).
TextEncoderCheckpoint load_text_encoder_folder(const std::string& dir);

class ClipTextBuilder : GraphEmitter {
 public:
  // prefix: what the checkpoint puts before transformers' names ("" as transformers 5 saves a
  // CLIPTextModel, "text_model." as earlier versions and published checkpoints do).
  ClipTextBuilder(const ClipTextConfig& cfg, WeightStore& weights, Graph& graph, int act_bytes, std::string prefix);

  // Frame ops, as transformers' forward: embeddings, then layer() by layer() to the hidden state wanted, then
  // final_layer_norm(). embeddings: ids (batch, tokens) I32 and positions (batch * tokens) I32, each in
  // [0, tokens) -> hidden_states[0], (batch * tokens, hidden_size).
  Ref embeddings(Ref ids, Ref positions, int batch, int tokens);
  // Block l on x: hidden_states[l] -> hidden_states[l + 1], a new tensor (x is left as it is).
  Ref layer(int l, Ref x, int batch, int tokens);
  Ref final_layer_norm(Ref x, int rows);
  // CLIPTextModelWithProjection's text_embeds from the last hidden state x (before the final LayerNorm):
  // text_projection(final_layer_norm(x[pooled_rows])), (batch, projection_dim). pooled_rows (batch) I32:
  // each prompt's row of x, where transformers pools (the end-of-text token's).
  Ref pooled_projection(Ref x, Ref pooled_rows, int batch, int tokens);

 private:
  const ClipTextConfig& cfg_;
  std::string prefix_;
};

// Every parameter of the architecture: checkpoint name (with prefix) and PyTorch shape, in dtype.
// CLIPTextModelWithProjection's text_projection.weight sits beside the text model, without the prefix.
std::vector<TensorSpec> clip_text_parameters(const ClipTextConfig& cfg, const std::string& prefix, DType dtype);

}  // namespace rtvd
