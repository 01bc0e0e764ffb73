#include "pipeline/prompt_encoder.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "pipeline/text/unicode_text.h"

namespace rtvd {

namespace {

ClipTokenizer open_tokenizer(const std::string& dir, const std::string& pad_token) {
  return dir.empty() ? ClipTokenizer::builtin(pad_token) : ClipTokenizer::load(dir);
}

}  // namespace

PromptEncoder::PromptEncoder(TextEncoderCheckpoint text_encoder, const std::string& tokenizer_dir,
                             const std::string& pad_token, std::unique_ptr<Backend> backend,
                             const TextEncoderOutputs& outputs)
    : tokenizer_(open_tokenizer(tokenizer_dir, pad_token)), backend_(std::move(backend)),
      label_(text_encoder.tensors.label()), encoder_(std::move(text_encoder), *backend_, outputs) {
  if (encoder_.tokens() != ClipTokenizer::kContextLength)
    fail(label_, ": the text encoder takes ", encoder_.tokens(), " positions (max_position_embeddings), expected ",
         ClipTokenizer::kContextLength, " (the tokens CLIP's tokenizer gives)");
  if (encoder_.config().vocab_size < int(tokenizer_.tokens().size()))
    fail(label_, ": the text encoder's vocab_size is ", encoder_.config().vocab_size, ", but the tokenizer has ",
         tokenizer_.tokens().size(), " tokens");
}

const PromptEncoder::Embedding& PromptEncoder::encode(const std::string& prompt, const std::string& flag,
                                                     std::string* notice) {
  // Far more than 77 tokens of any text; NFC's time grows quadratically on long runs of unordered combining
  // marks (0.23 s at 64 KiB), and the encoder would read none of it anyway.
  constexpr size_t kMaxPromptBytes = 16384;
  if (prompt.size() > kMaxPromptBytes)
    fail(flag, ": ", prompt.size(), " bytes, expected at most ", kMaxPromptBytes, " (the text encoder reads 75 tokens)");
  decode_utf8(prompt, flag);  // the tokenizer's own check would name the text, not the flag
  const ContextTokens t = tokenizer_.encode_context(prompt);
  if (notice)
    *notice = t.dropped == 0 ? std::string()
                             : cat("note: ", flag, " is ", t.dropped + ClipTokenizer::kContextLength - 2, " tokens long; the last ",
                                   t.dropped, " were dropped (the text encoder takes ", ClipTokenizer::kContextLength - 2,
                                   ")");
  auto it = cache_.find(prompt);
  if (it == cache_.end()) {
    Embedding e;
    e.hidden = encoder_.encode(t.ids, 1, pooled_width() ? &e.pooled : nullptr);
    it = cache_.emplace(prompt, std::move(e)).first;
  }
  return it->second;
}

std::vector<float> slerp(const std::vector<float>& a, const std::vector<float>& b, float t) {
  if (a.size() != b.size()) fail("slerp: embeddings of ", a.size(), " and ", b.size(), " values");
  double aa = 0, bb = 0, ab = 0;
  for (size_t i = 0; i < a.size(); ++i) aa += double(a[i]) * a[i], bb += double(b[i]) * b[i], ab += double(a[i]) * b[i];
  const double cos_omega = aa > 0 && bb > 0 ? std::clamp(ab / std::sqrt(aa * bb), -1.0, 1.0) : 1.0;
  double wa = 1 - t, wb = t;  // nearly parallel (or zero): the straight line
  if (std::fabs(cos_omega) < 0.9995) {
    const double omega = std::acos(cos_omega), so = std::sin(omega);
    wa = std::sin((1 - t) * omega) / so;
    wb = std::sin(t * omega) / so;
  }
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = float(wa * a[i] + wb * b[i]);
  return out;
}

}  // namespace rtvd
