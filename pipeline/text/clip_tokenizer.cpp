#include "pipeline/text/clip_tokenizer.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <queue>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/embed_file.h"
#include "pipeline/model_files/input_file.h"
#include "pipeline/model_files/json_text.h"
#include "pipeline/text/unicode_text.h"

// CLIP's published merges (MIT, assets/clip/LICENSE): 1.3 MB, so that builtin() works from anywhere.
RTVD_EMBED_FILE(clip_bpe_vocab, RTVD_ASSETS_DIR "/clip/bpe_simple_vocab_16e6.txt.gz");

namespace rtvd {

namespace {

using nlohmann::json;

constexpr const char* kBos = "<|startoftext|>";
constexpr const char* kEos = "<|endoftext|>";
constexpr const char* kBuiltinName = "built-in CLIP vocabulary (assets/clip/bpe_simple_vocab_16e6.txt.gz)";
// The merges CLIP's simple_tokenizer.py takes; with the 512 byte tokens, BOS and EOS: 49,408 tokens.
constexpr size_t kBuiltinMerges = 49152 - 256 - 2;
// Tokenizer files are a few MB (CLIP's tokenizer.json: 3.6 MB); anything far larger is not one.
constexpr size_t kMaxFileBytes = size_t(64) << 20;

// CLIP's bytes_to_unicode: each byte as a visible character. Printable Latin-1 bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves, the other 68 for U+0100 + n in byte order.
bool printable_byte(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

std::array<std::string, 256> byte_units() {
  std::array<std::string, 256> units;
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) append_utf8(units[b], printable_byte(b) ? char32_t(b) : next++);
  return units;
}

uint64_t pair_key(int32_t left, int32_t right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }

// ---- the two split patterns, by hand: each scans left to right and takes, at each position, the first
// alternative that matches, as a backtracking regex engine does.

bool is_other(char32_t c) { return !is_white_space(c) && !is_letter(c) && !is_number(c); }

size_t run_end(std::u32string_view t, size_t i, bool (*in_class)(char32_t)) {
  while (i < t.size() && in_class(t[i])) ++i;
  return i;
}

// The length of 's 't 're 've 'm 'll 'd at t[i], or 0: both patterns try these first, case-sensitive.
size_t contraction_at(std::u32string_view t, size_t i) {
  if (t[i] != U'\'' || i + 1 >= t.size()) return 0;
  const char32_t a = t[i + 1], b = i + 2 < t.size() ? t[i + 2] : 0;
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

// CLIP's pattern, matches kept and the rest (white space) dropped:
//   <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
std::vector<std::u32string_view> clip_split(std::u32string_view t) {
  static constexpr std::u32string_view kSpecial[] = {U"<|startoftext|>", U"<|endoftext|>"};
  std::vector<std::u32string_view> pieces;
  for (size_t i = 0; i < t.size();) {
    size_t end = i;
    for (const std::u32string_view s : kSpecial)
      if (t.substr(i).starts_with(s)) end = i + s.size();
    if (end == i) end = i + contraction_at(t, i);
    if (end == i) {
      if (is_letter(t[i])) end = run_end(t, i, is_letter);
      else if (is_number(t[i])) end = i + 1;  // digits one by one
      else if (is_other(t[i])) end = run_end(t, i, is_other);
      else {
        ++i;
        continue;
      }
    }
    pieces.push_back(t.substr(i, end - i));
    i = end;
  }
  return pieces;
}

// GPT-2's pattern, which tokenizers' ByteLevel pre-tokenizer applies to each piece:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// CLIP's pieces hold no white space, so it only splits the rest, such as "<|endoftext|>" lowercased from
// "<|ENDOFTEXT|>": "<|", "endoftext", "|>".
std::vector<std::u32string_view> byte_level_split(std::u32string_view t) {
  std::vector<std::u32string_view> pieces;
  for (size_t i = 0; i < t.size();) {
    size_t end = i + contraction_at(t, i);
    if (end == i) {
      // An optional space, then a run of one class: the classes are disjoint, so the first character after
      // the space decides which alternative matches.
      const size_t j = t[i] == U' ' && i + 1 < t.size() && !is_white_space(t[i + 1]) ? i + 1 : i;
      if (is_letter(t[j])) end = run_end(t, j, is_letter);
      else if (is_number(t[j])) end = run_end(t, j, is_number);
      else if (is_other(t[j])) end = run_end(t, j, is_other);
      else {
        // White space: \s+(?!\S) backs off one character when a non-space follows, unless that would leave
        // nothing, where \s+ takes the one.
        const size_t w = run_end(t, i, is_white_space);
        end = w == t.size() || w - i == 1 ? w : w - 1;
      }
    }
    pieces.push_back(t.substr(i, end - i));
    i = end;
  }
  return pieces;
}

// ---- files

std::string read_file(const std::string& path) { return read_regular_file(path, kMaxFileBytes, "a tokenizer file"); }

json parse_file(std::string_view text, const std::string& path) {
  DuplicateKeyFinder duplicates;
  json v = parse_json(text, path, &duplicates);
  if (duplicates.found) fail(path, ": key ", quote(duplicates.duplicate), " appears twice");
  return v;
}

std::string gunzip(std::string_view gz, const char* where) {
  constexpr size_t kMaxBytes = size_t(16) << 20;  // the file holds 3.2 MB
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail(where, ": zlib cannot start");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = uInt(gz.size());
  std::string out;
  char buffer[1 << 16];
  int status = Z_OK;
  while (status != Z_STREAM_END && out.size() <= kMaxBytes) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      const std::string reason = z.msg ? z.msg : "truncated";
      inflateEnd(&z);
      fail(where, ": not a valid gzip file (", reason, ")");
    }
    out.append(buffer, sizeof buffer - z.avail_out);
  }
  inflateEnd(&z);
  if (status != Z_STREAM_END) fail(where, ": larger than ", kMaxBytes >> 20, " MiB unpacked");
  return out;
}

// "a b" as its two tokens; anything else (no space, two spaces, an empty side) is an error naming where.
std::pair<std::string, std::string> merge_pair(std::string_view line, const std::string& where) {
  const size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos)
    fail(where, ": ", quote(line), ", expected two tokens separated by one space");
  return {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
}

// merges.txt: "#version: ..." on the first line, then one merge per line, highest priority first (blank
// lines, such as one at the end, are skipped).
std::vector<std::pair<std::string, std::string>> parse_merges_txt(std::string_view text, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if ((line_no == 1 && line.starts_with("#version")) || line.empty()) continue;
    merges.push_back(merge_pair(line, cat(path, " line ", line_no)));
  }
  return merges;
}

// Whether v is an integer from 0 to n - 1.
bool is_index(const json& v, size_t n) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() < n;
  return v.is_number_integer() && v.get<int64_t>() >= 0 && uint64_t(v.get<int64_t>()) < n;
}

// A vocabulary object (token -> id) as its tokens by id: the ids must be 0..N-1, each once, as CLIP's are,
// since they index the text encoder's embedding table.
std::vector<std::string> vocab_tokens(const json& vocab, const std::string& where) {
  if (!vocab.is_object() || vocab.empty())
    fail(where, ": vocabulary is ", json_excerpt(vocab), ", expected an object of token -> id");
  const size_t n = vocab.size();
  std::vector<std::string> tokens(n);
  std::vector<bool> taken(n, false);
  for (const auto& [token, id] : vocab.items()) {
    if (!is_index(id, n))
      fail(where, ": token ", quote(token), " has id ", json_excerpt(id), ", expected an integer from 0 to ",
           n - 1, " (the vocabulary holds ", n, " tokens)");
    const size_t i = id.get<size_t>();
    if (taken[i])
      fail(where, ": id ", i, " is given to both ", quote(tokens[i]), " and ", quote(token));
    taken[i] = true;
    tokens[i] = token;
  }
  return tokens;
}

const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// The pad token a special_tokens_map.json or tokenizer_config.json names, or "" where it names none.
std::string pad_token_in(std::string_view text, const std::string& path) {
  const json config = parse_file(text, path);
  if (!config.is_object()) fail(path, ": expected a JSON object, got ", json_excerpt(config));
  const json* pad = member(config, "pad_token");
  if (!pad || pad->is_null()) return "";
  if (pad->is_string()) return pad->get<std::string>();
  const json* content = pad->is_object() ? member(*pad, "content") : nullptr;
  if (content && content->is_string()) return content->get<std::string>();
  fail(path, ": pad_token is ", json_excerpt(*pad), ", expected a string or an object with a string \"content\"");
}

}  // namespace

struct ClipTokenizer::Sources {
  std::string vocab, merges, pad;
};

ClipTokenizer ClipTokenizer::load(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    fail(dir, ": not a directory (expected a tokenizer folder: tokenizer.json, or vocab.json and merges.txt)");
  return from_files(dir, [&](const std::string& name) -> std::optional<std::string> {
    // The error_code form: a path that cannot be looked at counts as absent, and the message says so.
    const std::string path = dir + "/" + name;
    std::error_code absent;
    if (!std::filesystem::exists(path, absent)) return std::nullopt;
    return read_file(path);
  });
}

ClipTokenizer ClipTokenizer::from_files(const std::string& dir, const ReadFile& read) {
  const std::string tokenizer_json = dir + "/tokenizer.json", vocab_json = dir + "/vocab.json",
                    merges_txt = dir + "/merges.txt";
  std::vector<std::string> tokens, added;
  std::vector<std::pair<std::string, std::string>> merges;
  Sources from;
  // tokenizer.json is preferred where both are present, as transformers does.
  if (const std::optional<std::string> text = read("tokenizer.json")) {
    from.vocab = from.merges = tokenizer_json;
    const json file = parse_file(*text, tokenizer_json);
    const json* model = file.is_object() ? member(file, "model") : nullptr;
    if (!model || !model->is_object()) fail(tokenizer_json, ": no \"model\" object");
    if (const json* type = member(*model, "type"); type && *type != "BPE")
      fail(tokenizer_json, ": model.type is ", json_excerpt(*type), ", expected \"BPE\"");
    if (const json* suffix = member(*model, "end_of_word_suffix"); suffix && *suffix != "</w>")
      fail(tokenizer_json, ": model.end_of_word_suffix is ", json_excerpt(*suffix), ", expected \"</w>\" (CLIP's BPE)");
    const json* vocab = member(*model, "vocab");
    if (!vocab) fail(tokenizer_json, ": no model.vocab");
    tokens = vocab_tokens(*vocab, tokenizer_json + " model.vocab");
    const json* merge_list = member(*model, "merges");
    if (!merge_list || !merge_list->is_array())
      fail(tokenizer_json, ": model.merges is ", merge_list ? json_excerpt(*merge_list) : "missing",
           ", expected an array");
    for (size_t i = 0; i < merge_list->size(); ++i) {  // "a b", or ["a", "b"] as newer tokenizers write them
      const json& m = (*merge_list)[i];
      const std::string where = cat(tokenizer_json, " model.merges[", i, "]");
      if (m.is_string()) merges.push_back(merge_pair(m.get_ref<const std::string&>(), where));
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) merges.emplace_back(m[0], m[1]);
      else fail(where, ": ", json_excerpt(m), ", expected \"a b\" or [\"a\", \"b\"]");
    }
    if (const json* list = member(file, "added_tokens"); list && !list->is_null()) {
      if (!list->is_array()) fail(tokenizer_json, ": added_tokens is ", json_excerpt(*list), ", expected an array");
      for (size_t i = 0; i < list->size(); ++i) {
        const json& a = (*list)[i];
        const json* content = a.is_object() ? member(a, "content") : nullptr;
        const json* id = a.is_object() ? member(a, "id") : nullptr;
        if (!content || !content->is_string() || content->get_ref<const std::string&>().empty() || !id ||
            !id->is_number_integer())
          fail(tokenizer_json, ": added_tokens[", i, "] is ", json_excerpt(a),
               ", expected an object with a non-empty string \"content\" and an integer \"id\"");
        // Tokens outside the vocabulary would index past the text encoder's embedding table.
        const std::string& text = content->get_ref<const std::string&>();
        if (!is_index(*id, tokens.size()) || tokens[id->get<size_t>()] != text)
          fail(tokenizer_json, ": added token ", quote(text), " (id ", json_excerpt(*id),
               ") is not in model.vocab with that id");
        added.push_back(text);
      }
    }
  } else {
    const std::optional<std::string> vocab_text = read("vocab.json");
    if (!vocab_text) fail(dir, ": no tokenizer.json, and no vocab.json with merges.txt");
    const std::optional<std::string> merges_text = read("merges.txt");
    if (!merges_text) fail(merges_txt, ": missing (vocab.json needs it)");
    from.vocab = vocab_json;
    from.merges = merges_txt;
    tokens = vocab_tokens(parse_file(*vocab_text, vocab_json), vocab_json);
    merges = parse_merges_txt(*merges_text, merges_txt);
  }
  // transformers reads special_tokens_map.json over tokenizer_config.json.
  std::string pad = kEos;
  from.pad = cat(dir, " (no pad_token given: the default)");
  for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
    const std::optional<std::string> text = read(name);
    if (!text) continue;
    const std::string path = dir + "/" + name;
    if (std::string named = pad_token_in(*text, path); !named.empty()) {
      pad = named;
      from.pad = path;
      break;
    }
  }
  return ClipTokenizer(std::move(tokens), merges, added, pad, from);
}

ClipTokenizer ClipTokenizer::builtin(const std::string& pad_token) {
  const std::string text = gunzip(RTVD_EMBEDDED(clip_bpe_vocab), kBuiltinName);
  // As CLIP's simple_tokenizer.py: the header line, then the first 48,894 merges.
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(kBuiltinMerges);
  size_t start = text.find('\n') + 1;
  while (merges.size() < kBuiltinMerges) {
    const size_t end = text.find('\n', start);
    if (start == 0 || end == std::string::npos) fail(kBuiltinName, ": fewer than ", kBuiltinMerges, " merges");
    merges.push_back(merge_pair(std::string_view(text).substr(start, end - start), kBuiltinName));
    start = end + 1;
  }
  // The vocabulary: the byte characters in CLIP's order (the printable bytes, then the others), the same
  // with </w>, one token per merge, then BOS and EOS.
  const std::array<std::string, 256> units = byte_units();
  std::vector<std::string> tokens;
  tokens.reserve(512 + merges.size() + 2);
  for (const bool printable : {true, false})
    for (int b = 0; b < 256; ++b)
      if (printable_byte(b) == printable) tokens.push_back(units[b]);
  for (size_t i = 0; i < 256; ++i) tokens.push_back(tokens[i] + "</w>");
  for (const auto& [a, b] : merges) tokens.push_back(a + b);
  tokens.push_back(kBos);
  tokens.push_back(kEos);
  return ClipTokenizer(std::move(tokens), merges, {}, pad_token,
                       {kBuiltinName, kBuiltinName, "built-in CLIP tokenizer"});
}

ClipTokenizer::ClipTokenizer(std::vector<std::string> tokens,
                             const std::vector<std::pair<std::string, std::string>>& merges,
                             const std::vector<std::string>& added, const std::string& pad_token, const Sources& from)
    : tokens_(std::move(tokens)) {
  ids_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (!ids_.emplace(tokens_[id], int32_t(id)).second)
      fail(from.vocab, ": token ", quote(tokens_[id]), " appears twice (ids ", ids_[tokens_[id]], " and ",
           id, ")");
  const auto find = [&](const std::string& token) {
    const auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  };

  // Every byte must have a token, alone and ending a word, or some text would have no ids.
  const std::array<std::string, 256> units = byte_units();
  for (int b = 0; b < 256; ++b) {
    byte_id_[b] = find(units[b]);
    byte_end_id_[b] = find(units[b] + "</w>");
    if (byte_id_[b] < 0 || byte_end_id_[b] < 0)
      fail(from.vocab, ": no token ", quote(units[b] + (byte_id_[b] < 0 ? "" : "</w>")), " (for byte ", b,
           "); a byte-level BPE vocabulary has every byte's character, alone and with </w>");
  }

  merge_list_.reserve(merges.size());
  merge_of_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t left = find(a), right = find(b), merged = find(a + b);
    if (left < 0 || right < 0 || merged < 0)
      fail(from.merges, ": merge ", rank + 1, " (", quote(a), " ", quote(b), ") ",
           left >= 0 && right >= 0 ? "makes " : "names ", quote(left < 0 ? a : right < 0 ? b : a + b),
           ", which is not in the vocabulary");
    merge_list_.emplace_back(left, right);
    // A repeated merge takes its later rank, as in tokenizers and CLIP's Python (a map built in order).
    merge_of_.insert_or_assign(pair_key(left, right), Merge{int32_t(rank), merged});
  }

  bos_ = find(kBos);
  eos_ = find(kEos);
  if (bos_ < 0 || eos_ < 0)
    fail(from.vocab, ": no token ", bos_ < 0 ? kBos : kEos, "; a CLIP vocabulary has ", kBos, " and ", kEos);
  pad_ = find(pad_token);
  if (pad_ < 0) fail(from.pad, ": pad token ", quote(pad_token), " is not in the vocabulary");

  // Added tokens are matched leftmost-longest: at each position the longest one that starts there.
  std::vector<std::string> special = {kBos, kEos, pad_token};
  special.insert(special.end(), added.begin(), added.end());
  std::sort(special.begin(), special.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  });
  special.erase(std::unique(special.begin(), special.end()), special.end());
  for (const std::string& s : special) added_.push_back({decode_utf8(s, from.vocab), find(s)});
}

std::vector<std::pair<std::string, std::string>> ClipTokenizer::merges() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merge_list_.size());
  for (const auto& [left, right] : merge_list_) out.emplace_back(tokens_[left], tokens_[right]);
  return out;
}

std::vector<int32_t> ClipTokenizer::encode(std::string_view text) const {
  const std::u32string t = decode_utf8(text, "text to tokenize");
  const std::u32string_view view = t;
  std::vector<int32_t> ids = {bos_};
  size_t start = 0;
  for (size_t i = 0; i < t.size();) {
    const auto hit = std::find_if(added_.begin(), added_.end(),
                                  [&](const AddedToken& a) { return view.substr(i).starts_with(a.text); });
    if (hit == added_.end()) {
      ++i;
      continue;
    }
    encode_segment(view.substr(start, i - start), ids);
    ids.push_back(hit->id);
    i += hit->text.size();
    start = i;
  }
  encode_segment(view.substr(start), ids);
  ids.push_back(eos_);
  return ids;
}

ContextTokens ClipTokenizer::encode_context(std::string_view text) const {
  ContextTokens out;
  out.ids = encode(text);
  if (out.ids.size() > size_t(kContextLength)) {
    out.dropped = int(out.ids.size()) - kContextLength;
    out.ids.resize(kContextLength - 1);
    out.ids.push_back(eos_);
  }
  out.ids.resize(kContextLength, pad_);
  return out;
}

// tokenizers' normalizer (NFC, \s+ -> " ", lowercase), then the two splits, then BPE per word.
void ClipTokenizer::encode_segment(std::u32string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::u32string spaced;
  bool in_run = false;
  for (const char32_t c : nfc(text)) {
    const bool space = is_white_space(c);
    if (!space) spaced += c;
    else if (!in_run) spaced += U' ';
    in_run = space;
  }
  const std::u32string normalized = to_lower(spaced);
  for (const std::u32string_view piece : clip_split(normalized))
    for (const std::u32string_view word : byte_level_split(piece)) encode_word(word, ids);
}

// BPE as tokenizers does it: a heap of adjacent pairs by (rank, position); the top one is merged unless a
// merge next to it has since changed either side, and the pairs it forms with its neighbours join the heap.
void ClipTokenizer::encode_word(std::u32string_view word, std::vector<int32_t>& ids) const {
  const std::string bytes = encode_utf8(word);
  const int n = int(bytes.size());
  struct Symbol {
    int32_t id;
    int prev, next;  // neighbours still in the word, -1 at the ends
  };
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    symbols[i] = {i + 1 < n ? byte_id_[b] : byte_end_id_[b], i - 1, i + 1 < n ? i + 1 : -1};
  }
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const auto it = merge_of_.find(pair_key(symbols[left].id, symbols[symbols[left].next].id));
    if (it != merge_of_.end()) heap.push({it->second.rank, left, it->second.id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;  // merged away, or now last
    Symbol& right = symbols[left.next];
    const auto it = merge_of_.find(pair_key(left.id, right.id));
    if (it == merge_of_.end() || it->second.id != top.id) continue;  // a neighbour changed since
    left.id = top.id;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    push(left.prev);
    push(top.pos);
  }
  for (int i = 0; i >= 0 && i < n; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace rtvd
