// The CLIP tokenizer: every string of tests/data/clip_tokenizer/golden.json (ids from transformers 5.17's
// CLIPTokenizer, tools/reference/export_clip_tokenizer_golden.py) with both pad tokens, untruncated and cut
// to 77; the loaders on files written here in each spelling; one error per kind of bad file, naming it; and
// the Unicode helpers beneath.
#include "pipeline/text/clip_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/text/unicode_text.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;
using test::error_of;
using testing::IsSubstring;

using Ids = std::vector<int32_t>;
using Merges = std::vector<std::pair<std::string, std::string>>;

constexpr int32_t kBos = 49406, kEos = 49407;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// text with everything but printable ASCII as \u{...}: invisible and look-alike characters show.
std::string escaped(const std::string& text) {
  std::string s;
  for (const char32_t c : decode_utf8(text, "golden text"))
    s += c >= 0x20 && c < 0x7f ? std::string(1, char(c)) : cat("\\u{", std::hex, uint32_t(c), "}");
  return s;
}

std::string ids_text(const Ids& ids) {
  std::string s;
  for (const int32_t id : ids) s += cat(s.empty() ? "" : " ", id);
  return s;
}

// What transformers gives with truncation=True, max_length=77, padding="max_length" (the golden script
// asserts this rule against it): BOS + the first 75 tokens + EOS, then the pad id.
ContextTokens fitted(Ids ids, int32_t pad) {
  ContextTokens out;
  if (ids.size() > 77) {
    out.dropped = int(ids.size()) - 77;
    ids.resize(76);
    ids.push_back(kEos);
  }
  ids.resize(77, pad);
  out.ids = ids;
  return out;
}

const ClipTokenizer& sd1() {
  static const ClipTokenizer t = ClipTokenizer::builtin("<|endoftext|>");
  return t;
}
const ClipTokenizer& sd2() {
  static const ClipTokenizer t = ClipTokenizer::builtin("!");
  return t;
}

TEST(ClipTokenizer, BuiltinVocabulary) {
  const ClipTokenizer& t = sd1();
  EXPECT_EQ(t.tokens().size(), 49408u);
  EXPECT_EQ(t.merges().size(), 48894u);
  EXPECT_EQ(t.bos_id(), kBos);
  EXPECT_EQ(t.eos_id(), kEos);
  EXPECT_EQ(t.pad_id(), kEos);
  EXPECT_EQ(sd2().pad_id(), 0);
  EXPECT_EQ(t.tokens()[0], "!");
  EXPECT_EQ(t.tokens()[256], "!</w>");
  EXPECT_EQ(t.tokens()[kBos], "<|startoftext|>");
  EXPECT_EQ(t.merges()[0], (std::pair<std::string, std::string>("i", "n")));
  EXPECT_PRED_FORMAT2(IsSubstring, "built-in CLIP tokenizer: pad token '<pad>' is not in the vocabulary",
                      error_of([] { ClipTokenizer::builtin("<pad>"); }));
}

TEST(ClipTokenizer, MatchesTransformersGolden) {
  const json golden = json::parse(read_text(test::test_data("clip_tokenizer/golden.json")));
  const json& cases = golden.at("cases");
  ASSERT_EQ(cases.size(), 2020u) << "golden.json: expected the 2,020 strings of export_clip_tokenizer_golden.py";
  int mismatches = 0, checked = 0, truncated = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const json& c : cases) {
    const std::string text = c.at("text");
    const Ids want_sd1 = c.at("ids");
    const Ids want_sd2 = c.contains("ids_pad_bang") ? c.at("ids_pad_bang").get<Ids>() : want_sd1;
    for (const auto& [t, want, name] : {std::tuple(&sd1(), &want_sd1, "SD 1.x (pad <|endoftext|>)"),
                                        std::tuple(&sd2(), &want_sd2, "SD 2.x (pad !)")}) {
      ++checked;
      const Ids got = t->encode(text);
      const ContextTokens want_fit = fitted(*want, t->pad_id());
      const ContextTokens got_fit = t->encode_context(text);
      truncated += want_fit.dropped > 0;
      if (got == *want && got_fit.ids == want_fit.ids && got_fit.dropped == want_fit.dropped) continue;
      if (++mismatches <= 5)
        ADD_FAILURE() << name << " \"" << escaped(text) << "\"\n  want " << ids_text(*want) << "\n  got  "
                      << ids_text(got) << "\n  77: dropped " << got_fit.dropped << ", want " << want_fit.dropped
                      << (got_fit.ids == want_fit.ids ? "" : "; the 77 ids differ");
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(mismatches, 0) << "of " << checked << " tokenizations";
  EXPECT_GT(truncated, 100) << "the golden file should hold many strings over 77 tokens";
  RecordProperty("seconds", std::to_string(seconds));
}

TEST(ClipTokenizer, AddedTokensAndContext) {
  // Special-token text is cut out of the raw text, exactly; lowercased from capitals it is plain text.
  EXPECT_EQ(sd1().encode("<|endoftext|>"), (Ids{kBos, kEos, kEos}));
  EXPECT_EQ(sd1().encode("a<|startoftext|>b"), (Ids{kBos, 320, kBos, 321, kEos}));
  EXPECT_NE(sd1().encode("<|ENDOFTEXT|>"), sd1().encode("<|endoftext|>"));
  // "!" is id 0 in SD 2.x wherever it occurs, "!</w>" (256) in SD 1.x.
  EXPECT_EQ(sd1().encode("!"), (Ids{kBos, 256, kEos}));
  EXPECT_EQ(sd2().encode("!"), (Ids{kBos, 0, kEos}));

  const ContextTokens empty = sd2().encode_context("");
  EXPECT_EQ(empty.dropped, 0);
  ASSERT_EQ(empty.ids.size(), 77u);
  EXPECT_EQ(empty.ids[0], kBos);
  EXPECT_EQ(empty.ids[1], kEos);
  EXPECT_EQ(empty.ids[76], 0);

  std::string long_text;
  for (int i = 0; i < 80; ++i) long_text += "fox ";
  const ContextTokens cut = sd1().encode_context(long_text);
  EXPECT_EQ(cut.dropped, 5);
  ASSERT_EQ(cut.ids.size(), 77u);
  EXPECT_EQ(cut.ids[75], cut.ids[1]);
  EXPECT_EQ(cut.ids[76], kEos);
  EXPECT_EQ(sd1().encode_context(long_text.substr(0, 75 * 4)).dropped, 0);
}

TEST(ClipTokenizer, InvalidUtf8IsAnError) {
  EXPECT_EQ(error_of([] { sd1().encode("a fox \xff"); }), "text to tokenize: not valid UTF-8 at byte 6 (0xFF)");
}

// ---- loading

// The tokens of a vocab.json and the lines of a merges.txt.
json vocab_json(const std::vector<std::string>& tokens) {
  json v = json::object();
  for (size_t i = 0; i < tokens.size(); ++i) v[tokens[i]] = i;
  return v;
}
std::string merges_txt(const Merges& merges) {
  std::string s = "#version: 0.2\n";
  for (const auto& [a, b] : merges) s += a + " " + b + "\n";
  return s;
}
json tokenizer_json(const std::vector<std::string>& tokens, const Merges& merges, bool merges_as_pairs) {
  json m = json::array();
  for (const auto& [a, b] : merges) m.push_back(merges_as_pairs ? json::array({a, b}) : json(a + " " + b));
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id)
    if (tokens[id] == "<|startoftext|>" || tokens[id] == "<|endoftext|>")
      added.push_back({{"id", id}, {"content", tokens[id]}, {"special", true}, {"normalized", false}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"model", {{"type", "BPE"}, {"vocab", vocab_json(tokens)}, {"merges", m}, {"end_of_word_suffix", "</w>"}}}};
}

// Strings whose ids exercise merges, digits, punctuation, accents, CJK and emoji, with "!" for the pad token.
const char* const kSamples[] = {"A watercolor FOX, trending on ArtStation!", "don't stop 1080p (masterpiece:1.2)",
                                "café naïve 日本語 😀👍🏽", "hello!world!! <|endoftext|> end"};

void expect_same_ids(const ClipTokenizer& loaded, const ClipTokenizer& reference) {
  EXPECT_EQ(loaded.pad_id(), reference.pad_id());
  for (const char* s : kSamples) {
    EXPECT_EQ(loaded.encode(s), reference.encode(s)) << s;
    EXPECT_EQ(loaded.encode_context(s).ids, reference.encode_context(s).ids) << s;
  }
}

TEST(ClipTokenizerLoad, VocabAndMerges) {
  test::TempDir dir("rtvd_clip_tokenizer");
  write_text(dir.path("vocab.json"), vocab_json(sd1().tokens()).dump());
  write_text(dir.path("merges.txt"), merges_txt(sd1().merges()));
  expect_same_ids(ClipTokenizer::load(dir.dir()), sd1());  // no pad token named: <|endoftext|>

  // SD 2.x's files: tokenizer_config.json names "!" as an object; special_tokens_map.json, read first, as a string.
  write_text(dir.path("tokenizer_config.json"),
             R"({"pad_token": {"content": "!", "lstrip": false}, "model_max_length": 77})");
  expect_same_ids(ClipTokenizer::load(dir.dir()), sd2());
  write_text(dir.path("special_tokens_map.json"), R"({"pad_token": "<|endoftext|>"})");
  expect_same_ids(ClipTokenizer::load(dir.dir()), sd1());
  write_text(dir.path("special_tokens_map.json"), R"({"bos_token": "<|startoftext|>", "pad_token": null})");
  expect_same_ids(ClipTokenizer::load(dir.dir()), sd2());  // null names none: on to tokenizer_config.json
}

TEST(ClipTokenizerLoad, TokenizerJsonBothMergeSpellings) {
  for (const bool pairs : {false, true}) {
    SCOPED_TRACE(pairs ? "merges as [\"a\", \"b\"]" : "merges as \"a b\"");
    test::TempDir dir("rtvd_clip_tokenizer");
    write_text(dir.path("tokenizer.json"), tokenizer_json(sd1().tokens(), sd1().merges(), pairs).dump());
    // A vocab.json beside it is ignored: tokenizer.json comes first.
    write_text(dir.path("vocab.json"), "not JSON");
    expect_same_ids(ClipTokenizer::load(dir.dir()), sd1());
    write_text(dir.path("special_tokens_map.json"), R"({"pad_token": {"content": "!"}})");
    expect_same_ids(ClipTokenizer::load(dir.dir()), sd2());
  }
}

TEST(ClipTokenizerLoad, AddedTokensOfTokenizerJson) {
  // Every added token is cut out of the raw text, not only the pad token: "!" here while the pad is EOS.
  json j = tokenizer_json(sd1().tokens(), sd1().merges(), true);
  j["added_tokens"].push_back({{"id", 0}, {"content", "!"}, {"special", true}});
  test::TempDir dir("rtvd_clip_tokenizer");
  write_text(dir.path("tokenizer.json"), j.dump());
  const ClipTokenizer t = ClipTokenizer::load(dir.dir());
  EXPECT_EQ(t.pad_id(), kEos);
  EXPECT_EQ(t.encode("hi!"), sd2().encode("hi!"));
  EXPECT_NE(t.encode("hi!"), sd1().encode("hi!"));
}

// A small vocabulary: the 512 byte tokens, "ab</w>", BOS and EOS, with the merge "a b</w>".
std::vector<std::string> small_tokens() {
  std::vector<std::string> t(sd1().tokens().begin(), sd1().tokens().begin() + 512);
  for (const char* s : {"ab</w>", "<|startoftext|>", "<|endoftext|>"}) t.push_back(s);
  return t;
}
const Merges kSmallMerges = {{"a", "b</w>"}};

TEST(ClipTokenizerLoad, SmallVocabulary) {
  test::TempDir dir("rtvd_clip_tokenizer");
  write_text(dir.path("vocab.json"), vocab_json(small_tokens()).dump());
  write_text(dir.path("merges.txt"), merges_txt(kSmallMerges) + "\n");  // a blank line at the end is fine
  const ClipTokenizer t = ClipTokenizer::load(dir.dir());
  // "ab" merges; "abc" has no merge for its bytes, so stays three.
  EXPECT_EQ(t.encode("ab abc"), (Ids{513, 512, 64, 65, 256 + 66, 514}));
  EXPECT_EQ(t.pad_id(), 514);
}

// The message of load(dir) after writing files (name -> text) into a fresh directory.
std::string load_error(const std::vector<std::pair<std::string, std::string>>& files, std::string* dir_path = nullptr) {
  test::TempDir dir("rtvd_clip_tokenizer");
  for (const auto& [name, text] : files) write_text(dir.path(name), text);
  if (dir_path) *dir_path = dir.dir().string();
  return error_of([&] { ClipTokenizer::load(dir.dir()); });
}

TEST(ClipTokenizerLoad, Errors) {
  const std::string vocab = vocab_json(small_tokens()).dump(), merges = merges_txt(kSmallMerges);
  std::string dir;
  const auto expect = [&](const std::string& file, const std::string& what, const std::string& message) {
    EXPECT_PRED_FORMAT2(IsSubstring, dir + "/" + file, message);
    EXPECT_PRED_FORMAT2(IsSubstring, what, message);
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };

  EXPECT_PRED_FORMAT2(IsSubstring, "/no/such/dir: not a directory",
                      error_of([] { ClipTokenizer::load("/no/such/dir"); }));
  EXPECT_PRED_FORMAT2(IsSubstring, ": no tokenizer.json, and no vocab.json with merges.txt", load_error({}));
  std::string m = load_error({{"vocab.json", vocab}}, &dir);
  expect("merges.txt", "missing", m);
  m = load_error({{"vocab.json", "{\"a\": 0,"}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "not valid JSON", m);
  m = load_error({{"vocab.json", "[1, 2]"}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "expected an object of token -> id", m);
  m = load_error({{"vocab.json", R"({"a": 0, "a": 1})"}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "key 'a' appears twice", m);
  m = load_error({{"vocab.json", std::string("{\"a\": 0}\0{\"b\": 1}", 17)}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "not valid JSON: a NUL byte at byte 8", m);
  m = load_error({{"vocab.json", R"({"a": 0, "b": 2})"}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "token 'b' has id 2, expected an integer from 0 to 1", m);
  m = load_error({{"vocab.json", R"({"a": 0, "b": "1"})"}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "token 'b' has id \"1\"", m);
  m = load_error({{"vocab.json", R"({"a": 0, "b": 0})"}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "id 0 is given to both 'a' and 'b'", m);
  m = load_error({{"vocab.json", R"({"a": 0, "a</w>": 1})"}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "no token '\u0100' (for byte 0)", m);

  std::vector<std::string> no_specials = small_tokens();
  no_specials.resize(513);
  m = load_error({{"vocab.json", vocab_json(no_specials).dump()}, {"merges.txt", merges}}, &dir);
  expect("vocab.json", "no token <|startoftext|>", m);

  m = load_error({{"vocab.json", vocab}, {"merges.txt", merges + "a b c\n"}}, &dir);
  expect("merges.txt", "line 3: 'a b c', expected two tokens separated by one space", m);
  m = load_error({{"vocab.json", vocab}, {"merges.txt", merges + "a zz\n"}}, &dir);
  expect("merges.txt", "merge 2 ('a' 'zz') names 'zz', which is not in the vocabulary", m);
  m = load_error({{"vocab.json", vocab}, {"merges.txt", merges + "a b\n"}}, &dir);
  expect("merges.txt", "merge 2 ('a' 'b') makes 'ab', which is not in the vocabulary", m);

  m = load_error(
      {{"vocab.json", vocab}, {"merges.txt", merges}, {"tokenizer_config.json", R"({"pad_token": "<pad>"})"}}, &dir);
  expect("tokenizer_config.json", "pad token '<pad>' is not in the vocabulary", m);
  m = load_error({{"vocab.json", vocab}, {"merges.txt", merges}, {"special_tokens_map.json", R"({"pad_token": 7})"}},
                 &dir);
  expect("special_tokens_map.json", "pad_token is 7, expected a string or an object with a string \"content\"", m);
  m = load_error({{"vocab.json", vocab}, {"merges.txt", merges}, {"special_tokens_map.json", "{"}}, &dir);
  expect("special_tokens_map.json", "not valid JSON", m);

  const json good = tokenizer_json(small_tokens(), kSmallMerges, true);
  const auto with = [&](const char* pointer, json value) {
    json j = good;
    j[json::json_pointer(pointer)] = std::move(value);
    return j.dump();
  };
  m = load_error({{"tokenizer.json", "{\"model\": "}}, &dir);
  expect("tokenizer.json", "not valid JSON", m);
  m = load_error({{"tokenizer.json", "{}"}}, &dir);
  expect("tokenizer.json", "no \"model\" object", m);
  m = load_error({{"tokenizer.json", with("/model/type", "WordPiece")}}, &dir);
  expect("tokenizer.json", "model.type is \"WordPiece\", expected \"BPE\"", m);
  m = load_error({{"tokenizer.json", with("/model/end_of_word_suffix", "")}}, &dir);
  expect("tokenizer.json", "model.end_of_word_suffix is \"\", expected \"</w>\"", m);
  m = load_error({{"tokenizer.json", with("/model/merges", json::array({json::array({"a"})}))}}, &dir);
  expect("tokenizer.json", "model.merges[0]: [\"a\"], expected \"a b\" or [\"a\", \"b\"]", m);
  m = load_error({{"tokenizer.json", with("/model/merges", json::array({"a  b"}))}}, &dir);
  expect("tokenizer.json", "model.merges[0]: 'a  b', expected two tokens separated by one space", m);
  m = load_error({{"tokenizer.json", with("/model/merges", "a b")}}, &dir);
  expect("tokenizer.json", "model.merges is \"a b\", expected an array", m);
  m = load_error({{"tokenizer.json", with("/added_tokens/0/id", 3)}}, &dir);
  expect("tokenizer.json", "added token '<|startoftext|>' (id 3) is not in model.vocab with that id", m);
  m = load_error({{"tokenizer.json", with("/added_tokens/0/id", 1u << 31)}}, &dir);
  expect("tokenizer.json", "added token '<|startoftext|>' (id 2147483648) is not in model.vocab with that id", m);
  m = load_error({{"tokenizer.json", with("/added_tokens/0", "<|startoftext|>")}}, &dir);
  expect("tokenizer.json", "added_tokens[0] is \"<|startoftext|>\", expected an object", m);
}

// ---- the Unicode helpers

TEST(UnicodeText, Utf8) {
  const std::string text = "a\u00e9\u65e5\U0001F600";
  EXPECT_EQ(decode_utf8(text, "t"), (std::u32string{U'a', 0xE9, 0x65E5, 0x1F600}));
  EXPECT_EQ(encode_utf8(decode_utf8(text, "t")), text);
  for (const auto& [bytes, message] : std::vector<std::pair<std::string, std::string>>{
           {"\x80", "byte 0 (0x80)"},                  // a continuation byte alone
           {"ab\xC3", "byte 2 (0xC3)"},                // truncated
           {"\xE2\x28\xA1", "byte 1 (0x28)"},          // not a continuation
           {"\xC0\x80", "byte 0 (0xC0)"},              // overlong NUL
           {"\xED\xA0\x80", "byte 0 (0xED)"},          // a UTF-16 surrogate
           {"\xF4\x90\x80\x80", "byte 0 (0xF4)"},      // past U+10FFFF
           {"\xF8\x88\x80\x80\x80", "byte 0 (0xF8)"}}) // a 5-byte form
    EXPECT_EQ(error_of([&] { decode_utf8(bytes, "prompt"); }), "prompt: not valid UTF-8 at " + message);
}

TEST(UnicodeText, NormalizeAndClassify) {
  EXPECT_EQ(nfc(U"e\u0301 A\u030a"), U"\u00e9 \u00c5");
  EXPECT_EQ(nfc(U"plain"), U"plain");
  // Per code point, no context: 'İ' has a two-code-point lowercase, and a final capital sigma stays σ.
  EXPECT_EQ(to_lower(U"ABC \u0130 \u039f\u0394\u03a3 \u00c9"), U"abc i\u0307 \u03bf\u03b4\u03c3 \u00e9");
  EXPECT_TRUE(is_letter(U'a') && is_letter(0x65E5) && is_letter(0x1D518));  // 日, 𝔘
  EXPECT_FALSE(is_letter(U'1') || is_letter(0x0301) || is_letter(U'_'));
  EXPECT_TRUE(is_number(U'7') && is_number(0x00BD) && is_number(0x216B) && is_number(0x0663));  // ½ Ⅻ ٣
  EXPECT_FALSE(is_number(U'x'));
  for (const char32_t c : {0x09, 0x0B, 0x20, 0x85, 0xA0, 0x2028, 0x3000}) EXPECT_TRUE(is_white_space(c)) << int(c);
  for (const char32_t c : {0x1C, 0x200B, 0x180E, 0xFEFF}) EXPECT_FALSE(is_white_space(c)) << int(c);
}

}  // namespace
}  // namespace rtvd
