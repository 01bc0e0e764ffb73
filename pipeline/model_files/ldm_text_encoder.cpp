// The text encoder of an original-layout checkpoint: SD 1.x's OpenAI CLIP, stored as transformers'
// CLIPTextModel already, and SD 2.x's OpenCLIP (open_clip's TextTransformer), renamed to it; and the config.
#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/dotted_name.h"
#include "pipeline/model_files/ldm_layout.h"

namespace rtvd {

namespace {

constexpr std::array<std::string_view, 2> kWeightBias = {"weight", "bias"};

// Whether name is a parameter of transformers' CLIPTextModel (without "text_model.").
bool is_clip_name(std::string_view name) {
  static const std::set<std::string, std::less<>> outer = {
      "embeddings.token_embedding.weight", "embeddings.position_embedding.weight", "final_layer_norm.weight",
      "final_layer_norm.bias"};
  static const std::set<std::string, std::less<>> layer = [] {
    std::set<std::string, std::less<>> s;
    for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
                          "layer_norm1", "layer_norm2", "mlp.fc1", "mlp.fc2"})
      for (std::string_view wb : kWeightBias) s.insert(cat(m, ".", wb));
    return s;
  }();
  if (outer.contains(name)) return true;
  const std::vector<std::string_view> p = split_name(name);
  return p.size() > 3 && p[0] == "encoder" && p[1] == "layers" && name_index(p[2]) >= 0 &&
         layer.contains(join_name(std::span(p).subspan(3)));
}

// An OpenCLIP resblock's modules other than the fused in_proj -> CLIPTextModel's.
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kResblockModules = {{
    {"ln_1", "layer_norm1"},
    {"ln_2", "layer_norm2"},
    {"attn.out_proj", "self_attn.out_proj"},
    {"mlp.c_fc", "mlp.fc1"},
    {"mlp.c_proj", "mlp.fc2"},
}};

// The OpenCLIP blocks the file holds (transformer.resblocks.N): the highest N + 1.
int open_clip_blocks(const LdmComponent& c) {
  const std::string resblocks = c.prefix + "transformer.resblocks.";
  int blocks = 0;
  for (const TensorView* t : c.tensors)
    if (t->name.starts_with(resblocks))
      blocks = std::max(blocks, 1 + name_index(split_name(std::string_view(t->name).substr(resblocks.size()))[0]));
  return blocks;
}

// text_projection (width, projection), applied as x @ P, as CLIPTextModelWithProjection's Linear weight
// (projection, width): a transposed copy in a file made in memory, which the set keeps alive.
void add_transposed_projection(TensorSet& set, const TensorView& t, int64_t width, const LdmComponent& c) {
  if (t.shape.size() != 2 || t.shape[0] != width ||
      (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16))
    fail(c.label(), ": tensor ", quote(t.name), ": expected a float (", width, ", projection) matrix (the width ",
         width, " of the token embedding first), got ", dtype_name(t.dtype), " ", shape_string(t.shape));
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const size_t e = dtype_size(t.dtype);
  auto file = std::make_shared<const SafeTensorsFile>(SafeTensorsFile::build(
      cat(c.label(), " (", t.name, " transposed)"), {{"text_projection.weight", t.dtype, {cols, rows}}},
      [&](size_t, uint8_t* out) {
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) std::memcpy(out + size_t(j * rows + i) * e, t.data + size_t(i * cols + j) * e, e);
      }));
  set.add("text_projection.weight", *file->find("text_projection.weight"), t.name, file);
}

// The OpenCLIP text tower under CLIPTextModel's names, its first `keep` blocks; text_projection with
// with_projection (SDXL), else dropped.
TensorSet map_open_clip_blocks(const LdmComponent& c, int keep, bool with_projection) {
  TensorSet set(c.label());
  const std::string resblocks = c.prefix + "transformer.resblocks.";
  const TensorView* token = nullptr;
  for (const TensorView* t : c.tensors)
    if (t->name == c.prefix + "token_embedding.weight") token = t;
  if (!token || token->shape.size() != 2)
    fail(c.label(), ": tensor '", c.prefix, "token_embedding.weight': expected (vocabulary, width), got ",
         token ? shape_string(token->shape) : "none");
  const int64_t width = token->shape[1];

  for (const TensorView* t : c.tensors) {
    const std::string_view rel = std::string_view(t->name).substr(c.prefix.size());
    const auto add = [&](const std::string& name, const TensorView& view) { set.add(name, view, t->name, c.file); };
    if (rel == "token_embedding.weight") {
      add("embeddings.token_embedding.weight", *t);
    } else if (rel == "positional_embedding") {
      add("embeddings.position_embedding.weight", *t);
    } else if (rel == "ln_final.weight" || rel == "ln_final.bias") {
      add(cat("final_layer_norm.", rel.substr(9)), *t);
    } else if (rel == "text_projection" && with_projection) {
      add_transposed_projection(set, *t, width, c);
    } else if (rel == "text_projection" || rel == "logit_scale") {
      continue;  // the CLIP model's projection into the joint space and its temperature: SD 2.x uses neither
    } else if (t->name.starts_with(resblocks)) {
      const std::vector<std::string_view> p = split_name(std::string_view(t->name).substr(resblocks.size()));
      const int n = name_index(p[0]);
      const std::string rest = join_name(std::span(p).subspan(1));
      const std::string layer = cat("encoder.layers.", n, ".");
      std::string mapped;
      for (const auto& [from, to] : kResblockModules)
        for (std::string_view wb : kWeightBias)
          if (rest == cat(from, ".", wb)) mapped = cat(to, ".", wb);
      const bool in_proj = rest == "attn.in_proj_weight" || rest == "attn.in_proj_bias";
      if (n < 0 || (mapped.empty() && !in_proj))
        fail(c.label(), ": tensor ", quote(t->name), ": not a parameter of an OpenCLIP block (ln_1, attn.in_proj_weight, "
             "attn.in_proj_bias, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj)");
      if (n >= keep) continue;  // the block after the hidden state SD 2.x takes
      if (!in_proj) {
        add(layer + mapped, *t);
        continue;
      }
      // q, k and v stacked along the rows: (3 width, width) and (3 width).
      const bool weight = rest.ends_with("weight");
      const std::vector<int64_t> want = weight ? std::vector<int64_t>{3 * width, width} : std::vector<int64_t>{3 * width};
      if (t->shape != want)
        fail(c.label(), ": tensor ", quote(t->name), ": expected ", shape_string(want), " (q, k and v of width ", width,
             ", the token embedding's), got ", shape_string(t->shape));
      for (int k = 0; k < 3; ++k) {
        const std::string name = cat(layer, "self_attn.", "qkv"[k], "_proj.", weight ? "weight" : "bias");
        add(name, row_slice(*t, k * width, (k + 1) * width, name));
      }
    } else {
      fail(c.label(), ": tensor ", quote(t->name), ": not a parameter of OpenCLIP's text tower (token_embedding, "
           "positional_embedding, transformer.resblocks, ln_final, text_projection)");
    }
  }
  if (with_projection && !set.find("text_projection.weight"))
    fail(c.label(), ": no tensor '", c.prefix, "text_projection' (the pooled projection SDXL's U-Net takes)");
  return set;
}

}  // namespace

TensorSet map_ldm_clip(const LdmComponent& c) {
  TensorSet set(c.label());
  for (const TensorView* t : c.tensors) {
    std::string_view rel = std::string_view(t->name).substr(c.prefix.size());
    if (rel.starts_with("text_model.")) rel.remove_prefix(std::string_view("text_model.").size());
    if (rel == "embeddings.position_ids") continue;  // a buffer, 0 to 76 (older transformers saved it)
    if (!is_clip_name(rel))
      fail(c.label(), ": tensor ", quote(t->name), ": not a parameter of transformers' CLIPTextModel (embeddings, "
           "encoder.layers, final_layer_norm)");
    set.add(std::string(rel), *t, t->name, c.file);
  }
  return set;
}

TensorSet map_open_clip(const LdmComponent& c, int layers) {
  const int blocks = open_clip_blocks(c);
  const int keep = layers < 0 ? blocks - 1 : layers;
  if (keep < 1 || (blocks != keep && blocks != keep + 1))
    fail(c.label(), ": ", blocks, " OpenCLIP blocks (", c.prefix, "transformer.resblocks.N), expected ",
         layers < 0 ? "at least 2 (the text encoder's and the last, which SD 2.x does not use)"
                    : cat("the text encoder config's ", layers, " or one more (the last, which SD 2.x does not use)"));
  return map_open_clip_blocks(c, keep, false);
}

TensorSet map_open_clip_with_projection(const LdmComponent& c, int layers) {
  const int blocks = open_clip_blocks(c);
  if (blocks < 1 || (layers >= 0 && blocks != layers))
    fail(c.label(), ": ", blocks, " OpenCLIP blocks (", c.prefix, "transformer.resblocks.N), expected ",
         layers < 0 ? "at least 1" : cat("the text_encoder_2 config's ", layers));
  return map_open_clip_blocks(c, blocks, true);
}

std::string infer_clip_config(const TensorSet& text_encoder, bool open_clip) {
  const TensorView& token = text_encoder.get_rank("embeddings.token_embedding.weight", 2);
  const int64_t width = token.shape[1];
  if (width % 64 != 0)
    fail(text_encoder.label(), ": tensor ", text_encoder.describe(token.name), ": width ", width,
         " is not a multiple of CLIP's head dim 64: no known text encoder (SD 1.x: 768, SD 2.x: 1024, SDXL: 768 and 1280); give a "
         "diffusers folder whose text_encoder/config.json describes it");
  int layers = 0;
  while (text_encoder.find(cat("encoder.layers.", layers, ".mlp.fc1.weight"))) ++layers;
  const TensorView* projection = text_encoder.find("text_projection.weight");
  nlohmann::json config = {
      {"architectures", {projection ? "CLIPTextModelWithProjection" : "CLIPTextModel"}},
      {"model_type", "clip_text_model"},
      {"vocab_size", token.shape[0]},
      {"hidden_size", width},
      {"intermediate_size", text_encoder.get_rank("encoder.layers.0.mlp.fc1.weight", 2).shape[0]},
      {"num_hidden_layers", layers},
      {"num_attention_heads", width / 64},
      {"max_position_embeddings", text_encoder.get_rank("embeddings.position_embedding.weight", 2).shape[0]},
      {"hidden_act", open_clip ? "gelu" : "quick_gelu"},
      {"layer_norm_eps", 1e-5},
  };
  if (projection) config["projection_dim"] = text_encoder.get_rank(projection->name, 2).shape[0];
  return config.dump(2);
}

}  // namespace rtvd
