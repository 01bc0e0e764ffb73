// A CLIP text encoder as a callable on a backend of its own: token ids -> hidden states. The graph is built
// for one batch size and kept (rebuilt when another is asked for); on the GPU its ops replay as one CUDA
// graph. The engine runs it when a prompt changes, not per frame.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/backends/backend.h"
#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/model_files/clip_text_config.h"
#include "pipeline/models/clip_text.h"

namespace rtvd {

// Which of transformers' outputs encode() gives, as diffusers' pipelines take them.
struct TextEncoderOutputs {
  // The hidden state clip_skip layers before the one taken without clip skip: SD's pipelines take the last,
  // through the final LayerNorm (hidden_states[-(clip_skip + 1)], normed); SDXL's the one before it, as it is
  // (hidden_states[-(clip_skip + 2)], no final LayerNorm).
  enum class Hidden { LastNormed, PenultimateRaw };
  Hidden hidden = Hidden::LastNormed;
  int clip_skip = 0;
  // Also CLIPTextModelWithProjection's text_embeds (SDXL's pooled embedding): needs a config of that class.
  bool pooled = false;
};

class TextEncoder {
 public:
  // Exactly the architecture's tensors, each of its shape (older transformers also saved the position_ids
  // buffer, which is ignored), else an Error naming the tensor. clip_skip N: the hidden state N layers before
  // the last, through the final LayerNorm (as diffusers' clip_skip); 0 = the last hidden state.
  TextEncoder(TextEncoderCheckpoint checkpoint, Backend& backend, int clip_skip = 0)
      : TextEncoder(std::move(checkpoint), backend, TextEncoderOutputs{.clip_skip = clip_skip}) {}
  TextEncoder(TextEncoderCheckpoint checkpoint, Backend& backend, const TextEncoderOutputs& outputs);
  TextEncoder(const std::string& dir, Backend& backend, int clip_skip = 0)
      : TextEncoder(load_text_encoder_folder(dir), backend, clip_skip) {}

  const ClipTextConfig& config() const { return cfg_; }
  int tokens() const { return cfg_.max_position_embeddings; }  // ids per prompt (77)
  int width() const { return cfg_.hidden_size; }
  int clip_skip() const { return outputs_.clip_skip; }
  int pooled_width() const { return outputs_.pooled ? cfg_.projection_dim : 0; }

  // ids: batch rows of tokens() ids, each in [0, vocab_size) -> (batch, tokens(), width()) floats. With
  // outputs.pooled, `pooled` gets (batch, pooled_width()) floats, each row pooled where transformers pools:
  // at the first of the row's largest id (CLIP's end-of-text token, 49407, the largest id of its vocabulary).
  std::vector<float> encode(const std::vector<int32_t>& ids, int batch, std::vector<float>* pooled = nullptr);

  // For benchmarks: the graph for `batch` prepared with ids written once, then `runs` forwards queued back
  // to back, each one's milliseconds (GPU events on the GPU, host time on the CPU).
  std::vector<double> time_forwards(const std::vector<int32_t>& ids, int batch, int runs);
  double forward_flops() const;

 private:
  void prepare(int batch);
  void write_ids(const std::vector<int32_t>& ids, int batch);

  ClipTextConfig cfg_;
  std::unique_ptr<WeightStore> weights_;
  std::string prefix_;
  Backend& backend_;
  TextEncoderOutputs outputs_;
  bool uploaded_ = false;
  Graph graph_;
  int batch_ = 0;  // of the prepared graph; 0 = none yet
  Ref ids_, positions_, hidden_;
  Ref pooled_rows_, pooled_;  // with outputs_.pooled
};

}  // namespace rtvd
