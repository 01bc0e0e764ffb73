// The mutator of clip_tokenizer_structured_fuzzer. Byte mutations break a tokenizer file's JSON at nearly every
// step and almost never make a merge whose tokens are in the vocabulary; this one splits the input into the
// prompt and the files (fuzz_targets.h), reads the vocabulary and merges from tokenizer.json or from
// vocab.json and merges.txt, changes tokens, ids, merges (added so that they build the prompt's own words,
// moved, repeated, spelt either way, broken), added tokens, the pad token and the model's keys, and writes the
// files again as valid JSON; and it puts Unicode's edge cases into the prompt: combining marks, Hangul jamo,
// emoji ZWJ sequences, case mappings that change length, white space of every kind, invalid UTF-8, and long
// repeats. Compiled without libFuzzer's coverage: its own branches are not the target's.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeline/text/unicode_text.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/mutation.h"

namespace rtvd::fuzz {
namespace {

using namespace std::literals;
using nlohmann::ordered_json;

constexpr const char* kBos = "<|startoftext|>";
constexpr const char* kEos = "<|endoftext|>";

// Text that tokenizers get wrong, for prompts and for tokens.
// clang-format off
constexpr std::string_view kEdges[] = {
    // combining marks: accents NFC composes, a mark with no base, a stack of marks, marks NFC reorders
    "e\u0301"sv, "\u0301"sv, "a\u0301\u0302\u0303\u0304\u0305\u0306"sv, "\u1e9b\u0323"sv, "a\u0323\u0302"sv,
    // Hangul: conjoining jamo NFC composes into a syllable, lone jamo, a syllable, a compatibility jamo
    "\u1100\u1161\u11a8"sv, "\u1100"sv, "\u11a8"sv, "\uac01"sv, "\u3131"sv,
    // emoji: a ZWJ family, a skin tone, a flag, a variation selector, a keycap
    "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"sv, "\U0001f44d\U0001f3fd"sv,
    "\U0001f1fa\U0001f1f3"sv, "\u2764\ufe0f"sv, "1\ufe0f\u20e3"sv,
    // case mappings that grow or have context: dotted I, capital sharp s, sigma, titlecase, Kelvin, ligature
    "\u0130"sv, "\u1e9e"sv, "\u03a3\u0391\u03a3"sv, "\u01c5"sv, "\u212a"sv, "\ufb03"sv, "\u212b"sv, "\u0345"sv,
    // white space of every kind, and characters like it that are not White_Space
    " "sv, "\t\n\r\v\f"sv, "\u00a0"sv, "\u3000"sv, "\u2028"sv, "\u0085"sv, "\u200b"sv, "\u180e"sv, "\ufeff"sv,
    // numbers split one by one, contractions, the case-sensitive special tokens
    "\u00bd"sv, "\u00b2"sv, "\u0663"sv, "\u216b"sv, "1080"sv, "'s"sv, "'S"sv, "'ll"sv, "\u2019s"sv, "''"sv,
    "<|startoftext|>"sv, "<|endoftext|>"sv, "<|ENDOFTEXT|>"sv, "<|endoftext"sv, "!"sv, "</w>"sv,
    // scripts: Arabic, Devanagari with a virama, Thai, CJK, kana with a combining voiced mark
    "\u0645\u0631\u062d\u0628\u0627"sv, "\u0915\u094d\u0937\u093f"sv, "\u0e20\u0e32\u0e29\u0e32"sv, "\u6f22\u5b57"sv,
    "\u304b\u3099"sv,
    // NUL, a noncharacter, the replacement character, private use, the last code point
    "\0"sv, "\uffff"sv, "\ufffd"sv, "\ue000"sv, "\U0010ffff"sv,
    // not UTF-8: a lone continuation byte, overlong, a surrogate, past U+10FFFF, a 5-byte lead, cut short, 0xFF
    "\x80"sv, "\xc0\xaf"sv, "\xed\xa0\x80"sv, "\xf4\x90\x80\x80"sv, "\xf8\x88\x80\x80\x80"sv, "\xe2\x82"sv, "\xff"sv,
    "\xc3"sv,
};
// clang-format on
constexpr const char* kPrompts[] = {"a photo of an astronaut riding a horse on mars",
                                    "A watercolor FOX, trending on ArtStation! don't stop 1080p (masterpiece:1.2)",
                                    "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001f600\U0001f44d\U0001f3fd", ""};

// The input as the target splits it, files in order.
struct Input {
  std::string prompt;
  std::vector<std::pair<std::string, std::string>> files;

  std::string* find(std::string_view name) {
    for (auto& [n, text] : files)
      if (n == name) return &text;
    return nullptr;
  }
  void set(std::string_view name, std::string text) {
    if (std::string* f = find(name))
      *f = std::move(text);
    else
      files.emplace_back(name, std::move(text));
  }
  void erase(std::string_view name) {
    std::erase_if(files, [&](const auto& f) { return f.first == name; });
  }
};

Input parse_input(std::string_view bytes) {
  const TokenizerInput split = split_tokenizer_input(bytes);
  Input in{std::string(split.prompt), {}};
  for (const auto& [name, text] : split.files) in.files.emplace_back(name, text);
  return in;
}

std::string serialise(const Input& in) {
  std::string out = in.prompt;
  for (const auto& [name, text] : in.files) out.append(kFileMark).append(name).append(kFileMarkEnd).append(text);
  return out;
}

// Each byte's character in UTF-8, and the 256 of them in the order of CLIP's vocabulary (code point order).
const std::array<std::string, 256>& unit_of_byte() {
  static const std::array<std::string, 256> units = [] {
    std::array<std::string, 256> u;
    for (const auto& [c, b] : clip_byte_of_unit()) append_utf8(u[b], c);
    return u;
  }();
  return units;
}

// The vocabulary and merges, from whichever files hold them, and the rest of tokenizer.json.
struct Model {
  bool tokenizer_json = true;                   // else vocab.json and merges.txt
  ordered_json file = ordered_json::object();   // tokenizer.json without model.vocab and model.merges
  ordered_json vocab = ordered_json::object();  // token -> id
  ordered_json merges = ordered_json::array();  // "a b", ["a", "b"], or whatever the file holds
  bool version_line = true;                     // merges.txt starts with "#version: 0.2"
};

std::optional<Model> read_model(Input& in) {
  Model m;
  if (const std::string* text = in.find("tokenizer.json")) {
    m.file = parse_object(*text);
    if (!m.file.is_object() || !m.file.contains("model") || !m.file["model"].is_object()) return std::nullopt;
    ordered_json& model = m.file["model"];
    if (model.contains("vocab") && model["vocab"].is_object()) m.vocab = model["vocab"];
    if (model.contains("merges") && model["merges"].is_array()) m.merges = model["merges"];
    model.erase("vocab");
    model.erase("merges");
    return m;
  }
  const std::string* vocab = in.find("vocab.json");
  if (!vocab || (m.vocab = parse_object(*vocab)).is_null()) return std::nullopt;
  m.tokenizer_json = false;
  m.version_line = false;
  if (const std::string* text = in.find("merges.txt")) {
    for (size_t start = 0, line = 0; start < text->size(); ++line) {
      size_t end = text->find('\n', start);
      if (end == std::string::npos) end = text->size();
      const std::string l = text->substr(start, end - start);
      start = end + 1;
      if (line == 0 && l.starts_with("#version"))
        m.version_line = true;
      else if (!l.empty() && l != "\r")
        m.merges.push_back(l.ends_with('\r') ? l.substr(0, l.size() - 1) : l);
    }
  }
  return m;
}

void write_model(const Model& m, Input& in, Rng& rng) {
  if (m.tokenizer_json) {
    ordered_json file = m.file;
    file["model"]["vocab"] = m.vocab;
    file["model"]["merges"] = m.merges;
    in.set("tokenizer.json", dump(file, rng));
    return;
  }
  in.erase("tokenizer.json");
  in.set("vocab.json", dump(m.vocab, rng));
  const std::string newline = rng.chance(10) ? "\r\n" : "\n";
  std::string text = m.version_line ? "#version: 0.2" + newline : "";
  for (const ordered_json& merge : m.merges) {
    if (merge.is_string())
      text += merge.get<std::string>();
    else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
      text += merge[0].get<std::string>() + " " + merge[1].get<std::string>();
    else
      text += merge.dump();
    text += newline;
    if (rng.chance(2)) text += newline;  // blank lines are skipped
  }
  if (!text.empty() && rng.chance(10)) text.pop_back();  // no newline at the end
  in.set("merges.txt", text);
}

std::string some_token(const ordered_json& vocab, Rng& rng) {
  if (vocab.empty()) return "a";
  auto it = vocab.begin();
  std::advance(it, rng.below(vocab.size()));
  return it.key();
}

void add_token(Model& m, const std::string& token) {
  if (m.vocab.contains(token)) return;
  const size_t id = m.vocab.size();
  m.vocab[token] = id;
}

// A merge of a and b at a random rank (usually late, as learned merges go), with the token it makes.
void add_merge(Model& m, const std::string& a, const std::string& b, Rng& rng) {
  add_token(m, a + b);
  const ordered_json merge =
      m.tokenizer_json && rng.chance(50) ? ordered_json::array({a, b}) : ordered_json(a + " " + b);
  const size_t rank = rng.chance(50) ? m.merges.size() : rng.below(m.merges.size() + 1);
  m.merges.insert(m.merges.begin() + std::ptrdiff_t(rank), merge);
}

// Merges that build a piece of the prompt up from its bytes, as CLIP's byte characters: left to right, or
// pairs anywhere in it (which then compete by rank), the last byte with </w> most of the time. These merges
// fire, where random ones would hardly ever meet their pair.
void add_prompt_merges(Model& m, const std::string& prompt, Rng& rng) {
  const std::string source = prompt.empty() ? std::string(rng.pick(kPrompts)) : prompt;
  if (source.empty()) return;
  size_t start = rng.below(source.size()), end = start;
  const size_t length = 2 + rng.below(10);
  while (end < source.size() && end - start < length && source[end] != ' ') ++end;
  std::vector<std::string> units;
  for (size_t i = start; i < end; ++i) {
    const char c = source[i];
    units.push_back(unit_of_byte()[uint8_t(c >= 'A' && c <= 'Z' ? c + 32 : c)]);
  }
  if (units.empty()) return;
  if (rng.chance(70)) units.back() += "</w>";
  if (rng.chance(60)) {
    std::string left = units[0];
    for (size_t k = 1; k < units.size(); ++k) {
      add_merge(m, left, units[k], rng);
      left += units[k];
    }
  } else {
    for (size_t n = 1 + rng.below(units.size()); n > 0 && units.size() > 1; --n) {
      const size_t k = rng.below(units.size() - 1);
      add_merge(m, units[k], units[k + 1], rng);
    }
  }
}

// A tokenizer that loads: the 512 byte tokens in CLIP's order, BOS, EOS, and merges for the prompt.
Model fresh_model(const std::string& prompt, Rng& rng) {
  static const ordered_json vocab = [] {
    ordered_json v = ordered_json::object();
    size_t id = 0;
    for (const char* suffix : {"", "</w>"})
      for (const std::string& unit : unit_of_byte()) v[unit + suffix] = id++;
    v[kBos] = id++;
    v[kEos] = id;
    return v;
  }();
  Model m;
  m.tokenizer_json = rng.chance(60);
  m.vocab = vocab;
  if (m.tokenizer_json) {
    const ordered_json added = ordered_json::array({ordered_json{{"id", 512}, {"content", kBos}, {"special", true}},
                                                    ordered_json{{"id", 513}, {"content", kEos}, {"special", true}}});
    m.file = {
        {"version", "1.0"}, {"added_tokens", added}, {"model", {{"type", "BPE"}, {"end_of_word_suffix", "</w>"}}}};
  }
  for (uint64_t n = 1 + rng.below(4); n > 0; --n) add_prompt_merges(m, prompt, rng);
  return m;
}

std::string edge_token(const Model& m, Rng& rng) {
  switch (rng.below(4)) {
    case 0: return edge_string(rng);
    case 1: return some_token(m.vocab, rng) + some_token(m.vocab, rng);
    default: return std::string(rng.pick(kEdges));
  }
}

// One change to the vocabulary, the merges, the added tokens or the model's keys.
void mutate_model(Model& m, const std::string& prompt, Rng& rng) {
  const size_t merges = m.merges.size();
  switch (rng.below(14)) {
    case 0:
    case 1:
    case 2: add_prompt_merges(m, prompt, rng); break;
    case 3: add_merge(m, some_token(m.vocab, rng), some_token(m.vocab, rng), rng); break;
    case 4:  // a merge removed, or moved to another rank
      if (merges == 0) break;
      if (rng.chance(50)) {
        m.merges.erase(rng.below(merges));
      } else {
        // A repeat: the later rank counts.
        const ordered_json merge = m.merges[rng.below(merges)];
        m.merges.insert(m.merges.begin() + std::ptrdiff_t(rng.below(merges + 1)), merge);
        if (rng.chance(70)) m.merges.erase(rng.below(merges + 1));
      }
      break;
    case 5: {  // a merge spelt the other way, or not as a merge at all
      if (merges == 0) break;
      ordered_json& merge = m.merges[rng.below(merges)];
      if (merge.is_string() && m.tokenizer_json && rng.chance(60)) {
        const std::string s = merge.get<std::string>();
        const size_t space = s.find(' ');
        if (space != std::string::npos) merge = ordered_json::array({s.substr(0, space), s.substr(space + 1)});
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string() &&
                 rng.chance(60)) {
        merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
      } else {
        constexpr const char* kBad[] = {"a  b", "a b c", "a", " a", "a ", "", "\xc3\xa9 \xe2\x82\xac", "zz a"};
        merge = rng.chance(50) ? ordered_json(rng.pick(kBad)) : wrong_value(rng);
      }
      break;
    }
    case 6:  // a token of its own: an edge case, or two tokens joined
      add_token(m, edge_token(m, rng));
      break;
    case 7:  // a token removed: a byte's, BOS, EOS, one a merge makes
      if (!m.vocab.empty())
        m.vocab.erase(rng.chance(30) ? std::string(rng.chance(50) ? kBos : kEos) : some_token(m.vocab, rng));
      break;
    case 8: {  // a token renamed, given another's id, or a bad id
      if (m.vocab.empty()) break;
      const std::string token = some_token(m.vocab, rng);
      if (rng.chance(40)) {
        const ordered_json id = m.vocab[token];
        m.vocab.erase(token);
        m.vocab[edge_token(m, rng)] = id;
      } else if (rng.chance(50)) {
        std::swap(m.vocab[token], m.vocab[some_token(m.vocab, rng)]);  // still 0..N-1, each once
      } else {
        m.vocab[token] = rng.chance(70) ? edge_integer(rng) : wrong_value(rng);
      }
      break;
    }
    case 9: {  // added_tokens: one for a token of the vocabulary, for a new token, or a bad one
      if (!m.tokenizer_json) break;
      ordered_json& list = m.file["added_tokens"];
      if (!list.is_array() || rng.chance(3)) list = rng.chance(50) ? ordered_json::array() : wrong_value(rng);
      if (!list.is_array()) break;
      if (!list.empty() && rng.chance(20)) {
        list.erase(rng.below(list.size()));
        break;
      }
      std::string token = rng.chance(50) ? edge_token(m, rng) : some_token(m.vocab, rng);
      add_token(m, token);
      ordered_json entry = {{"id", m.vocab[token]}, {"content", token}, {"special", rng.chance(50)}};
      if (rng.chance(15)) entry["id"] = rng.chance(50) ? edge_integer(rng) : wrong_value(rng);
      if (rng.chance(10)) entry["content"] = rng.chance(50) ? ordered_json("") : wrong_value(rng);
      if (rng.chance(5)) entry = wrong_value(rng);
      list.push_back(entry);
      break;
    }
    case 10: {  // the model's keys
      if (!m.tokenizer_json) break;
      ordered_json& model = m.file["model"];
      constexpr const char* kTypes[] = {"BPE", "WordPiece", "bpe", ""};
      constexpr const char* kSuffixes[] = {"</w>", "", "</w> ", "##"};
      if (rng.chance(40))
        model["type"] = rng.chance(80) ? ordered_json(rng.pick(kTypes)) : wrong_value(rng);
      else if (rng.chance(60))
        model["end_of_word_suffix"] = rng.chance(80) ? ordered_json(rng.pick(kSuffixes)) : wrong_value(rng);
      else
        model.erase(rng.chance(50) ? "type" : "end_of_word_suffix");
      break;
    }
    case 11:  // the other files: tokenizer.json <-> vocab.json and merges.txt
      m.tokenizer_json = !m.tokenizer_json;
      if (m.tokenizer_json && !m.file.contains("model")) m.file["model"] = {{"type", "BPE"}};
      break;
    case 12: m.version_line = !m.version_line; break;
    default: m = fresh_model(prompt, rng); break;
  }
}

// special_tokens_map.json or tokenizer_config.json: a pad token of the vocabulary, SD 2.x's "!", one missing
// from it, as a string or an object, null, a wrong type; or the file gone.
void mutate_pad(Input& in, const Model& m, Rng& rng) {
  const char* name = rng.chance(60) ? "special_tokens_map.json" : "tokenizer_config.json";
  if (rng.chance(15)) {
    in.erase(name);
    return;
  }
  ordered_json pad;
  switch (rng.below(8)) {
    case 0: pad = kEos; break;
    case 1: pad = "!"; break;
    case 2:
    case 3: pad = some_token(m.vocab, rng); break;
    case 4:
      pad = {{"content", rng.chance(70) ? some_token(m.vocab, rng) : "!"}, {"lstrip", false}, {"normalized", true}};
      break;
    case 5: pad = nullptr; break;
    case 6: pad = edge_token(m, rng); break;
    default: pad = wrong_value(rng); break;
  }
  ordered_json file = {{"bos_token", kBos}, {"eos_token", kEos}, {"pad_token", pad}};
  if (rng.chance(20)) file.erase("pad_token");
  if (rng.chance(10)) file["model_max_length"] = 77;
  in.set(name, rng.chance(3) ? dump(wrong_value(rng), rng) : dump(file, rng));
}

// A position in text, at a character boundary most of the time.
size_t position(const std::string& text, Rng& rng) {
  size_t at = rng.below(text.size() + 1);
  if (rng.chance(90))
    while (at > 0 && at < text.size() && (uint8_t(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

// One change to the prompt; `room` is how many bytes it may grow by.
void mutate_prompt(std::string& prompt, const Model* m, size_t room, Rng& rng) {
  const size_t at = position(prompt, rng);
  switch (rng.below(9)) {
    case 0:
    case 1:
    case 2: prompt.insert(at, rng.pick(kEdges)); break;
    case 3:  // a token of the vocabulary, in the text: an added token, or what merges build
      prompt.insert(at, m ? some_token(m->vocab, rng) : std::string(rng.chance(50) ? kBos : kEos));
      break;
    case 4: {  // a long repeat of an edge case or of a piece of the prompt: long words, many words, many marks
      const size_t from = position(prompt, rng);
      std::string unit = rng.chance(60) || from == prompt.size() ? std::string(rng.pick(kEdges))
                                                                 : prompt.substr(from, 1 + rng.below(8));
      if (rng.chance(30)) unit += ' ';
      constexpr size_t kLengths[] = {80, 100, 300, 1000, 1000, 3000, 10000, 60000};
      const size_t length = std::min(room, rng.pick(kLengths));
      std::string repeat;
      while (!unit.empty() && repeat.size() + unit.size() <= length) repeat += unit;
      prompt.insert(at, repeat);
      break;
    }
    case 5:
      if (!prompt.empty()) prompt.erase(at, 1 + rng.below(rng.chance(80) ? 8 : prompt.size()));
      break;
    case 6: prompt = rng.pick(kPrompts); break;
    default: mutate_bytes(prompt, prompt.size() + std::min<size_t>(room, 64)); break;
  }
}

}  // namespace
}  // namespace rtvd::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  const std::string original(reinterpret_cast<const char*>(data), size);
  const auto bytes = [&] {  // libFuzzer's own mutations, on the whole input
    std::string text = original;
    mutate_bytes(text, max_size);
    return emit(text, data, max_size);
  };
  if (rng.chance(5)) return bytes();
  Input in = parse_input(original);
  std::optional<Model> model = read_model(in);
  const size_t step = rng.below(10);
  if (step < 4) {
    const size_t room = max_size > size ? max_size - size : 0;
    for (uint64_t n = 1 + rng.below(2); n > 0; --n) mutate_prompt(in.prompt, model ? &*model : nullptr, room, rng);
  } else if (step < 8) {
    // Prompts alone (the built-in vocabulary) stay so most of the time; a file that is not a tokenizer's
    // gives way to a fresh one.
    if (!model && (!in.files.empty() || rng.chance(20))) model = fresh_model(in.prompt, rng);
    if (model) {
      for (uint64_t n = 1 + rng.below(3); n > 0; --n) {
        if (rng.chance(20))
          mutate_pad(in, *model, rng);
        else
          mutate_model(*model, in.prompt, rng);
      }
      write_model(*model, in, rng);
    }
  } else if (step == 8 && !in.files.empty()) {  // one file's bytes, deep nesting, or a duplicate key
    auto& [name, text] = in.files[rng.below(in.files.size())];
    const bool json = name.ends_with(".json");
    switch (rng.below(4)) {
      case 0:
        if (json) text = with_duplicate_key(text, rng.chance(50) ? "model" : "pad_token", "null");
        break;
      case 1:  // a first member nested as deep as fits
        if (json && max_size > size + 16 && text.find('{') != std::string::npos)
          text.insert(text.find('{') + 1, "\"deep\":" + nested_arrays(nesting_depth(rng, max_size - size - 16)) + ",");
        break;
      default: mutate_bytes(text, text.size() + 64); break;
    }
  } else if (!in.files.empty()) {  // a file gone, all gone, or one's text under another's name after it
    const size_t n = in.files.size();
    if (rng.chance(20)) {
      in.files.clear();
    } else if (rng.chance(50)) {
      in.files.erase(in.files.begin() + std::ptrdiff_t(rng.below(n)));
    } else {
      std::pair<std::string, std::string> file = {in.files[rng.below(n)].first, in.files[rng.below(n)].second};
      in.files.push_back(std::move(file));
    }
  } else {
    return bytes();
  }
  const std::string out = serialise(in);
  return out.size() <= max_size ? emit(out, data, max_size) : bytes();
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                                            uint8_t* out, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  Input x = parse_input({reinterpret_cast<const char*>(a), a_size});
  const Input y = parse_input({reinterpret_cast<const char*>(b), b_size});
  if (rng.chance(50)) {
    x.prompt = y.prompt;  // one's prompt with the other's files
  } else {
    for (const auto& [name, text] : y.files)  // each file of b replaces a's with even odds
      if (rng.chance(50)) x.set(name, text);
  }
  return emit(serialise(x), out, max_size);
}
