#include "pipeline/text_encoder.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "base/error.h"
#include "base/quoted_text.h"
#include "device.h"
#include "pipeline/models/clip_text.h"

namespace rtvd {

namespace {

// Where the checkpoint's names start: transformers 5 saves a CLIPTextModel without "text_model.", earlier
// versions and the published SD checkpoints with it.
std::string name_prefix(const TensorSet& tensors) {
  for (const char* prefix : {"", "text_model."})
    if (tensors.find(std::string(prefix) + "embeddings.token_embedding.weight")) return prefix;
  fail(tensors.label(), ": no tensor 'embeddings.token_embedding.weight' or 'text_model.embeddings.token_embedding.weight'"
                        " (not a CLIPTextModel checkpoint)");
}

bool penultimate(const TextEncoderOutputs& o) { return o.hidden == TextEncoderOutputs::Hidden::PenultimateRaw; }

}  // namespace

TextEncoder::TextEncoder(TextEncoderCheckpoint checkpoint, Backend& backend, const TextEncoderOutputs& outputs)
    : cfg_(checkpoint.config), backend_(backend), outputs_(outputs) {
  if (outputs.clip_skip < 0 || outputs.clip_skip >= cfg_.num_hidden_layers)
    fail("--clip-skip ", outputs.clip_skip, ": expected 0 to ", cfg_.num_hidden_layers - 1, " (the text encoder has ",
         cfg_.num_hidden_layers, " layers)");
  const TensorSet& tensors = checkpoint.tensors;
  if (outputs.pooled && cfg_.projection_dim == 0)
    fail(tensors.label(), ": the pooled text embedding needs a CLIPTextModelWithProjection (its text_projection), "
         "but the config is a CLIPTextModel's");
  prefix_ = name_prefix(tensors);
  // Exactly the architecture's tensors, each of its shape, whatever clip skip leaves unused.
  std::set<std::string> expected;
  for (const TensorSpec& s : clip_text_parameters(cfg_, prefix_, DType::F16)) {
    tensors.get_float(s.name, s.shape);
    expected.insert(s.name);
  }
  for (const TensorView& t : tensors.tensors())
    if (!expected.count(t.name) && t.name != prefix_ + "embeddings.position_ids") {
      const std::string source = tensors.source_name(t.name);
      fail(tensors.label(), ": unexpected tensor ", quote(source.empty() ? t.name : source),
           " (not a parameter of this config's ", cfg_.projection_dim ? "CLIPTextModelWithProjection" : "CLIPTextModel",
           ")");
    }
  weights_ = std::make_unique<WeightStore>(std::move(checkpoint.tensors));
}

void TextEncoder::prepare(int batch) {
  if (batch == batch_) return;
  graph_ = Graph{};
  const int T = tokens(), L = cfg_.num_hidden_layers;
  ids_ = graph_.add_tensor("input_ids", Elem::I32, {batch, T}, true);
  positions_ = graph_.add_tensor("position_ids", Elem::I32, {batch * T}, true);
  ClipTextBuilder builder(cfg_, *weights_, graph_, int(backend_.act_bytes()), prefix_);
  // hidden_states[k] is the state after k blocks (0: the embeddings); the one returned, and the last one for
  // the pooled output.
  const int hidden_at = L - outputs_.clip_skip - penultimate(outputs_);
  const int blocks = outputs_.pooled ? L : hidden_at;
  Ref x = builder.embeddings(ids_, positions_, batch, T);
  for (int k = 0;; ++k) {
    if (k == hidden_at) hidden_ = penultimate(outputs_) ? x : builder.final_layer_norm(x, batch * T);  // (batch * T, D)
    if (k == blocks) break;
    x = builder.layer(k, x, batch, T);
  }
  graph_.tensors[hidden_.id].persistent = true;  // read after the run
  if (outputs_.pooled) {
    pooled_rows_ = graph_.add_tensor("pooled_rows", Elem::I32, {batch}, true);
    pooled_ = builder.pooled_projection(x, pooled_rows_, batch, T);  // (batch, P)
    graph_.tensors[pooled_.id].persistent = true;
  }
  if (!uploaded_) backend_.upload_weights(*weights_);
  uploaded_ = true;
  backend_.prepare(graph_);
  std::vector<int32_t> positions(size_t(batch) * T);
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = int32_t(i % T);
  backend_.write(positions_, positions.data(), positions.size());
  batch_ = batch;
}

void TextEncoder::write_ids(const std::vector<int32_t>& ids, int batch) {
  if (batch < 1) fail("text encoder: batch ", batch, ", expected at least 1");
  if (ids.size() != size_t(batch) * tokens())
    fail("text encoder: expected ", size_t(batch) * tokens(), " ids (", batch, " x ", tokens(), "), got ", ids.size());
  for (int32_t id : ids)
    if (id < 0 || id >= cfg_.vocab_size) fail("text encoder: token id ", id, " outside the vocabulary [0, ", cfg_.vocab_size, ")");
  prepare(batch);
  backend_.write(ids_, ids.data(), ids.size());
  if (outputs_.pooled) {
    // transformers pools at argmax(ids): the first of the row's largest id (CLIP's end-of-text token, whose id
    // 49407 is the vocabulary's largest; for such rows transformers 5's first-eos_token_id rule is the same).
    std::vector<int32_t> rows(batch);
    for (int b = 0; b < batch; ++b) {
      const auto row = ids.begin() + ptrdiff_t(b) * tokens();
      rows[b] = int32_t(b * tokens() + (std::max_element(row, row + tokens()) - row));
    }
    backend_.write(pooled_rows_, rows.data(), rows.size());
  }
}

std::vector<float> TextEncoder::encode(const std::vector<int32_t>& ids, int batch, std::vector<float>* pooled) {
  if (pooled && !outputs_.pooled) fail("text encoder: the pooled output was asked for, but not built");
  write_ids(ids, batch);
  backend_.run_frame();
  std::vector<float> hidden(size_t(batch) * tokens() * width());
  backend_.read(hidden_, hidden.data(), hidden.size());
  if (pooled) {
    pooled->assign(size_t(batch) * pooled_width(), 0.0f);
    backend_.read(pooled_, pooled->data(), pooled->size());
  }
  return hidden;
}

std::vector<double> TextEncoder::time_forwards(const std::vector<int32_t>& ids, int batch, int runs) {
  write_ids(ids, batch);
  if (backend_.is_cuda()) return cuda_event_times_ms(backend_.device_view(hidden_).stream, runs, [&] { backend_.run_frame(); });
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    backend_.run_frame();
    ms.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return ms;
}

double TextEncoder::forward_flops() const {
  double f = 0;
  for (const Op& op : graph_.frame) f += op.flops;
  return f;
}

}  // namespace rtvd
