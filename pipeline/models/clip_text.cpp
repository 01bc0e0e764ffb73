#include "pipeline/models/clip_text.h"

#include <utility>

#include "base/error.h"
#include "pipeline/model_files/diffusers_folder.h"

namespace rtvd {

TextEncoderCheckpoint load_text_encoder_folder(const std::string& dir) {
  return {load_clip_text_config(dir + "/config.json"),
          open_component_weights(component_weights(dir, "model", "pytorch_model", "text encoder"))};
}

ClipTextBuilder::ClipTextBuilder(const ClipTextConfig& cfg, WeightStore& weights, Graph& graph, int act_bytes,
                                 std::string prefix)
    : GraphEmitter(weights, graph, act_bytes), cfg_(cfg), prefix_(std::move(prefix)) {}

// Shapes: n = batch, T = tokens (77), D = hidden_size, F = intermediate_size, P = projection_dim; rows = n*T.
Ref ClipTextBuilder::embeddings(Ref ids, Ref positions, int batch, int tokens) {
  if (tokens > cfg_.max_position_embeddings)
    fail("text encoder: ", tokens, " tokens, but the model has ", cfg_.max_position_embeddings, " positions");
  ops_ = &g_.frame;
  tag_ = "text";
  const int D = cfg_.hidden_size, rows = batch * tokens;
  const std::string& p = prefix_;
  // x = token_embedding[ids] + position_embedding[positions]: the second lookup accumulates into the first's output.
  EmbeddingOp token;
  token.p.n = rows;
  token.p.rows = cfg_.vocab_size;
  token.p.dim = D;
  token.table = matrix(p + "embeddings.token_embedding.weight", cfg_.vocab_size, D);
  token.ids = ids;
  token.y = new_act("embeddings", {rows, D});
  Ref x = token.y;
  emit("embeddings.token_embedding", std::move(token), 0, double(act_bytes_) * rows * D);  // (n*T, D)
  EmbeddingOp position;
  position.p.n = rows;
  position.p.rows = cfg_.max_position_embeddings;
  position.p.dim = D;
  position.p.accumulate = true;
  position.table = matrix(p + "embeddings.position_embedding.weight", cfg_.max_position_embeddings, D);
  position.ids = positions;
  position.y = x;
  emit("embeddings.position_embedding", std::move(position), 0, 2.0 * act_bytes_ * rows * D);  // (n*T, D) += pos
  return x;
}

Ref ClipTextBuilder::layer(int l, Ref x, int batch, int tokens) {
  if (l < 0 || l >= cfg_.num_hidden_layers) fail("text encoder: layer ", l, " of ", cfg_.num_hidden_layers);
  const int D = cfg_.hidden_size, F = cfg_.intermediate_size, rows = batch * tokens;
  const float eps = cfg_.layer_norm_eps;
  const Activation hidden_act =
      cfg_.hidden_act == ClipTextConfig::HiddenAct::Gelu ? Activation::Gelu : Activation::QuickGelu;
  const std::string b = cat(prefix_, "encoder.layers.", l);
  // Causal self-attention: one fused QKV projection, read in place by the attention op.
  Ref n1 = layer_norm(b + ".layer_norm1", x, rows, D, eps);  // (n*T, D)
  Ref wqkv = weights_.get(b + ".self_attn.qkv_proj.weight", Elem::Act, [&] {
    WeightTensor t = WeightTensor::stacked({3 * D, D}, {});
    for (const char* name : {".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight"})
      t.parts.push_back(weights_.view(b + name, {D, D}));
    return t;
  });
  Ref bqkv = weights_.get(b + ".self_attn.qkv_proj.bias", Elem::F32, [&] {
    WeightTensor t = WeightTensor::floats({3 * D}, {});
    for (const char* name : {".self_attn.q_proj.bias", ".self_attn.k_proj.bias", ".self_attn.v_proj.bias"}) {
      const auto v = weights_.read(b + name, {D});
      t.values.insert(t.values.end(), v.begin(), v.end());
    }
    return t;
  });
  Ref qkv = linear(b + ".self_attn.qkv_proj", n1, rows, D, 3 * D, wqkv, bqkv, {});  // (n*T, 3D): Q | K | V
  Ref a = attention(b + ".self_attn", qkv, qkv.at(D), qkv.at(2 * D), batch, cfg_.num_attention_heads, tokens, tokens,
                    D, 3 * D, 3 * D, /*causal=*/true);  // (n*T, D)
  x = linear(b + ".self_attn.out_proj", a, rows, D, D, matrix(b + ".self_attn.out_proj.weight", D, D),
             vector(b + ".self_attn.out_proj.bias", D), x);  // (n*T, D) + x
  // MLP: fc1 with the activation in its epilogue, fc2 with the residual in its.
  Ref n2 = layer_norm(b + ".layer_norm2", x, rows, D, eps);  // (n*T, D)
  Ref h = linear(b + ".mlp.fc1", n2, rows, D, F, matrix(b + ".mlp.fc1.weight", F, D), vector(b + ".mlp.fc1.bias", F),
                 {}, hidden_act);  // (n*T, F)
  return linear(b + ".mlp.fc2", h, rows, F, D, matrix(b + ".mlp.fc2.weight", D, F), vector(b + ".mlp.fc2.bias", D),
                x);  // (n*T, D) + x
}

Ref ClipTextBuilder::final_layer_norm(Ref x, int rows) {
  return layer_norm(prefix_ + "final_layer_norm", x, rows, cfg_.hidden_size, cfg_.layer_norm_eps);  // (rows, D)
}

Ref ClipTextBuilder::pooled_projection(Ref x, Ref pooled_rows, int batch, int tokens) {
  if (cfg_.projection_dim < 1) fail("text encoder: a CLIPTextModel has no text_projection (pooled output)");
  const int D = cfg_.hidden_size, P = cfg_.projection_dim;
  // The LayerNorm works row by row: normalizing the gathered rows alone is final_layer_norm(x)[rows].
  EmbeddingOp gather;
  gather.p.n = batch;
  gather.p.rows = batch * tokens;
  gather.p.dim = D;
  gather.table = x;
  gather.ids = pooled_rows;
  gather.y = new_act("pooled", {batch, D});
  Ref pooled = gather.y;
  emit("pooled", std::move(gather), 0, 2.0 * act_bytes_ * batch * D);  // (n, D)
  pooled = final_layer_norm(pooled, batch);                              // (n, D)
  return linear("text_projection", pooled, batch, D, P, matrix("text_projection.weight", P, D), {}, {});  // (n, P)
}

std::vector<TensorSpec> clip_text_parameters(const ClipTextConfig& cfg, const std::string& prefix, DType dtype) {
  const int64_t D = cfg.hidden_size, F = cfg.intermediate_size;
  std::vector<TensorSpec> specs;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    specs.push_back({prefix + name, dtype, std::move(shape)});
  };
  add("embeddings.token_embedding.weight", {cfg.vocab_size, D});
  add("embeddings.position_embedding.weight", {cfg.max_position_embeddings, D});
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string b = cat("encoder.layers.", l, ".");
    for (const char* norm : {"layer_norm1", "layer_norm2"}) {
      add(b + norm + ".weight", {D});
      add(b + norm + ".bias", {D});
    }
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      add(b + "self_attn." + proj + ".weight", {D, D});
      add(b + "self_attn." + proj + ".bias", {D});
    }
    add(b + "mlp.fc1.weight", {F, D});
    add(b + "mlp.fc1.bias", {F});
    add(b + "mlp.fc2.weight", {D, F});
    add(b + "mlp.fc2.bias", {D});
  }
  add("final_layer_norm.weight", {D});
  add("final_layer_norm.bias", {D});
  if (cfg.projection_dim > 0) specs.push_back({"text_projection.weight", dtype, {cfg.projection_dim, D}});
  return specs;
}

}  // namespace rtvd
