// A CLIP text encoder as a callable on a backend of its own: token ids -> hidden states. The graph is built
// for one batch size and kept (rebuilt when another is asked for); on the GPU its ops replay as one CUDA
// graph. The engine runs it when a prompt changes, not per frame.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/backends/backend.h"
#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/model_files/clip_text_config.h"
#include "pipeline/models/clip_text.h"

namespace rtvd {

class TextEncoder {
 public:
  // Exactly the architecture's tensors, each of its shape (older transformers also saved the position_ids
  // buffer, which is ignored), else an Error naming the tensor. clip_skip N: the hidden state N layers before
  // the last, through the final LayerNorm (as diffusers' clip_skip); 0 = the last hidden state.
  TextEncoder(TextEncoderCheckpoint checkpoint, Backend& backend, int clip_skip = 0);
  TextEncoder(const std::string& dir, Backend& backend, int clip_skip = 0)
      : TextEncoder(load_text_encoder_folder(dir), backend, clip_skip) {}

  const ClipTextConfig& config() const { return cfg_; }
  int tokens() const { return cfg_.max_position_embeddings; }  // ids per prompt (77)
  int width() const { return cfg_.hidden_size; }
  int clip_skip() const { return clip_skip_; }

  // ids: batch rows of tokens() ids, each in [0, vocab_size) -> (batch, tokens(), width()) floats.
  std::vector<float> encode(const std::vector<int32_t>& ids, int batch);

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
  int clip_skip_ = 0;
  bool uploaded_ = false;
  Graph graph_;
  int batch_ = 0;  // of the prepared graph; 0 = none yet
  Ref ids_, positions_, hidden_;
};

}  // namespace rtvd
