// CLIP's tokenizer: byte-level BPE, giving the ids transformers' CLIPTokenizer gives (5.17, on Hugging
// Face's tokenizers; tests/clip_tokenizer_test.cpp checks 2,020 strings against it). For a text:
//   1. added tokens (<|startoftext|>, <|endoftext|>, the pad token, tokenizer.json's added_tokens) are cut
//      out of the raw text, exact and case-sensitive; each is its id;
//   2. each piece between them is normalized: NFC, every run of white space to one space, lowercase;
//   3. split by CLIP's pattern, <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|
//      [^\s\p{L}\p{N}]+ (the matches kept, the rest dropped), then each match by GPT-2's byte-level pattern;
//   4. each word's UTF-8 bytes, as CLIP's byte-to-unicode characters with "</w>" on the last, are merged
//      pair by pair, the lowest-ranked adjacent pair first (leftmost among equals), into vocabulary ids;
//   5. <|startoftext|> ids <|endoftext|>.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rtvd {

// A text as the text encoder takes it: ClipTokenizer::kContextLength ids.
struct ContextTokens {
  std::vector<int32_t> ids;  // BOS, at most 75 tokens, EOS, then the pad id up to 77
  int dropped = 0;           // tokens cut from the end to fit (a caller names this in a one-line notice)
};

class ClipTokenizer {
 public:
  static constexpr int kContextLength = 77;

  // A diffusers tokenizer/ folder: tokenizer.json (model.vocab, model.merges, added_tokens), else vocab.json
  // and merges.txt; the pad token from special_tokens_map.json, else tokenizer_config.json, else
  // <|endoftext|>. SD 1.x pads with <|endoftext|> (49407), SD 2.x with "!" (0). Any bad or missing file is
  // an rtvd::Error naming it.
  static ClipTokenizer load(const std::string& dir);
  // load() on texts instead of a folder (what the fuzzers pass): read(name) is the text of the folder's file
  // name ("tokenizer.json", "vocab.json", ...), or std::nullopt where there is none; dir names the files in
  // error messages.
  using ReadFile = std::function<std::optional<std::string>(const std::string& name)>;
  static ClipTokenizer from_files(const std::string& dir, const ReadFile& read);
  // CLIP's published vocabulary (assets/clip/bpe_simple_vocab_16e6.txt.gz, built into the binary).
  static ClipTokenizer builtin(const std::string& pad_token = "<|endoftext|>");

  // BOS, the text's ids, EOS: untruncated. Text that is not valid UTF-8 is an rtvd::Error.
  std::vector<int32_t> encode(std::string_view text) const;
  // encode(text) cut to BOS + its first 75 tokens + EOS, then padded with the pad id.
  ContextTokens encode_context(std::string_view text) const;

  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t pad_id() const { return pad_; }
  // What a vocab.json and merges.txt of this tokenizer hold: the tokens by id, the merges by rank.
  const std::vector<std::string>& tokens() const { return tokens_; }
  std::vector<std::pair<std::string, std::string>> merges() const;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // of the merged token
  };
  struct AddedToken {
    std::u32string text;
    int32_t id;
  };
  struct Sources;  // the file each part came from, for error messages

  ClipTokenizer(std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
                const std::vector<std::string>& added, const std::string& pad_token, const Sources& from);
  void encode_segment(std::u32string_view text, std::vector<int32_t>& ids) const;
  void encode_word(std::u32string_view word, std::vector<int32_t>& ids) const;

  std::vector<std::string> tokens_;                   // by id
  std::unordered_map<std::string, int32_t> ids_;      // token -> id
  std::vector<std::pair<int32_t, int32_t>> merge_list_;  // by rank
  std::unordered_map<uint64_t, Merge> merge_of_;      // (left id, right id) -> merge
  int32_t byte_id_[256], byte_end_id_[256];           // each byte's character, and the same with </w>
  std::vector<AddedToken> added_;                     // longest first, for leftmost-longest matching
  int32_t bos_ = 0, eos_ = 0, pad_ = 0;
};

}  // namespace rtvd
