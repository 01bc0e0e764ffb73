// Prompts -> the U-Net's cross-attention context: CLIP's tokenizer, then the text encoder on a backend of its
// own. Embeddings are cached by prompt, so a prompt costs an encoder run once, however often it comes back
// (the GUI's Enter, prompt travel's two ends, the empty negative prompt).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/backends/backend.h"
#include "pipeline/text/clip_tokenizer.h"
#include "pipeline/text_encoder.h"

namespace rtvd {

class PromptEncoder {
 public:
  // tokenizer_dir: the checkpoint's tokenizer/ folder, or "" for CLIP's published vocabulary padded with
  // pad_token (single-file checkpoints carry none).
  PromptEncoder(TextEncoderCheckpoint text_encoder, const std::string& tokenizer_dir, const std::string& pad_token,
                std::unique_ptr<Backend> backend, int clip_skip)
      : PromptEncoder(std::move(text_encoder), tokenizer_dir, pad_token, std::move(backend),
                      TextEncoderOutputs{.clip_skip = clip_skip}) {}
  PromptEncoder(TextEncoderCheckpoint text_encoder, const std::string& tokenizer_dir, const std::string& pad_token,
                std::unique_ptr<Backend> backend, const TextEncoderOutputs& outputs);

  int tokens() const { return encoder_.tokens(); }
  int width() const { return encoder_.width(); }
  int pooled_width() const { return encoder_.pooled_width(); }

  struct Embedding {
    std::vector<float> hidden;  // (tokens(), width())
    std::vector<float> pooled;  // (pooled_width()), empty without TextEncoderOutputs::pooled
  };
  // The prompt's embedding. A prompt over the token limit is cut; `notice` then says how many tokens were
  // dropped (one line naming `flag`), else it is left empty.
  const Embedding& encode(const std::string& prompt, const std::string& flag, std::string* notice);
  // (tokens(), width()) floats for the prompt: encode()'s hidden state.
  const std::vector<float>& embed(const std::string& prompt, const std::string& flag, std::string* notice) {
    return encode(prompt, flag, notice).hidden;
  }

 private:
  ClipTokenizer tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::string label_;  // the text encoder's weights, for errors
  TextEncoder encoder_;
  std::map<std::string, Embedding> cache_;
};

// Spherical interpolation from a (t = 0) to b (t = 1), the whole embedding as one vector (as prompt-travel
// tools do): a straight line between two embeddings passes through shorter ones, which the U-Net reads as a
// weaker prompt midway. Nearly parallel embeddings take the straight line.
std::vector<float> slerp(const std::vector<float>& a, const std::vector<float>& b, float t);

}  // namespace rtvd
