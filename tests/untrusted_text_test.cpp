// Text from files rtvd did not write reaches a message or rtvd's output only through
// base/quoted_text.h: escaped (no byte a terminal acts on, no NUL to cut the message) and excerpted
// (a 10 MB value or a 100,000-dimension shape costs a message no more than a short one). First the helper
// against an unescaper written from its description, on fresh random bytes; then each kind of source through
// its real parser on a crafted file, and the rtvd binary end to end.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/graph/weights.h"
#include "pipeline/io/png.h"
#include "pipeline/model_files/diffusers_folder.h"
#include "pipeline/model_files/lora.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/single_file.h"
#include "pipeline/text/clip_tokenizer.h"
#include "pipeline/text/unicode_text.h"
#include "support/process.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

// A message that quotes one string from a file, with a path of a temporary directory in front.
constexpr size_t kMaxMessageBytes = 300;

// m with every byte outside printable ASCII as \xNN: for a failure's report, which must not garble the
// terminal either (written here, not taken from the helper under test).
std::string shown(std::string_view m) {
  std::string out;
  for (const char c : m) {
    const auto b = static_cast<unsigned char>(c);
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", b);
    out += b < 0x20 || b >= 0x7f ? std::string(hex) : std::string(1, c);
  }
  return out;
}

// Whether m is one printable line of at most max_bytes naming each of names: well-formed UTF-8 (by
// pipeline/text's decoder, not the escaper's) without a C0 control (NUL, ESC, newline), DEL or C1 control
// (0x9b is CSI).
testing::AssertionResult one_printable_line(const std::string& m, const std::vector<std::string>& names,
                                            size_t max_bytes = kMaxMessageBytes) {
  std::u32string chars;
  try {
    chars = decode_utf8(m, "message");
  } catch (const Error& e) {
    return testing::AssertionFailure() << e.what() << ": " << shown(m.substr(0, 500));
  }
  for (const char32_t c : chars)
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
      return testing::AssertionFailure() << "control character " << uint32_t(c) << " in " << shown(m.substr(0, 500));
  if (m.size() > max_bytes)
    return testing::AssertionFailure() << m.size() << " bytes: " << shown(m.substr(0, 500)) << "...";
  for (const std::string& name : names)
    if (m.find(name) == std::string::npos)
      return testing::AssertionFailure() << "does not name " << shown(name) << ": " << shown(m);
  return testing::AssertionSuccess();
}

// The bytes escaped text stands for, from quoted_text.h's description of its escapes: \" \\ \n \t \r, \uXXXX
// (a code point) and \xNN (a byte).
std::string unescaped(std::string_view e) {
  std::string out;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] != '\\') {
      out += e[i];
      continue;
    }
    const char kind = e.at(++i);
    if (kind == 'x' || kind == 'u') {
      const size_t digits = kind == 'x' ? 2 : 4;
      const auto value = std::stoul(std::string(e.substr(i + 1, digits)), nullptr, 16);
      if (kind == 'x') out += char(value);
      else append_utf8(out, char32_t(value));
      i += digits;
    } else {
      out += kind == 'n' ? '\n' : kind == 't' ? '\t' : kind == 'r' ? '\r' : kind;
    }
  }
  return out;
}

// Bytes to hurt a terminal and a decoder: printable ASCII, quotes and backslashes, C0 controls and DEL, C1
// controls as UTF-8, raw bytes 0x80-0xff, characters of 2 to 4 bytes (some that reorder text), overlong forms,
// surrogates and sequences cut short.
std::string hostile_text(test::Rng& rng, size_t pieces) {
  std::string s;
  for (size_t i = 0; i < pieces; ++i) {
    switch (rng.integer(0, 8)) {
      case 0: s += char(rng.integer(0x20, 0x7e)); break;
      case 1: s += "\"\\"[rng.integer(0, 1)]; break;
      case 2: s += char(rng.integer(0, 1) ? rng.integer(0, 0x1f) : 0x7f); break;
      case 3: s += "\xc2", s += char(rng.integer(0x80, 0x9f)); break;
      case 4: s += char(rng.integer(0x80, 0xff)); break;
      case 5: {
        char32_t c = char32_t(rng.integer(0xa0, 0x10ffff));
        if (c >= 0xd800 && c <= 0xdfff) c = 0x202e;  // RIGHT-TO-LEFT OVERRIDE instead of a surrogate
        append_utf8(s, rng.integer(0, 3) ? c : char32_t(rng.integer(0x2028, 0x202e)));
        break;
      }
      case 6: s += rng.integer(0, 1) ? "\xc0\x80" : "\xe0\x80\x80"; break;  // overlong
      case 7: s += "\xed\xa0\x80"; break;                                   // a surrogate
      default: s += rng.integer(0, 1) ? "\xe2\x82" : "\xf0\x9f\x98"; break; // cut short
    }
  }
  return s;
}

TEST(QuotedText, EscapedPrefixIsPrintableBoundedLongestAndUnescapesToTheInput) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int trial = 0; trial < 2000; ++trial) {
    const std::string s = hostile_text(rng, size_t(rng.integer(0, 120)));
    const size_t max = size_t(rng.integer(0, 300));
    size_t taken = 0;
    const std::string out = escaped_prefix(s, max, taken);
    SCOPED_TRACE(cat("input ", shown(s), ", max ", max));
    ASSERT_TRUE(one_printable_line(out, {}, max));
    ASSERT_LE(taken, s.size());
    ASSERT_EQ(unescaped(out), s.substr(0, taken)) << shown(out);
    if (taken < s.size()) ASSERT_GT(out.size() + 6, max) << "stopped before the longest prefix that fits";  // \uXXXX

    const std::string marker = cat("... (", s.size(), " bytes)");
    EXPECT_EQ(printable(s, max), taken == s.size() ? out : out + marker);
    EXPECT_EQ(quote(s, max), taken == s.size() ? "'" + out + "'" : "'" + out + "'" + marker);
  }
}

TEST(QuotedText, KeepsPrintableCharactersAndNamesEachEscape) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  std::string text;  // Latin and CJK letters, which stay as they are
  while (text.size() < kExcerptBytes - 4)
    append_utf8(text, char32_t(rng.integer(0, 1) ? rng.integer('a', 'z') : rng.integer(0x4e00, 0x9fff)));
  EXPECT_EQ(printable(text), text);
  EXPECT_EQ(printable("\xf0\x9f\x98\x80 \xc3\xa9"), "\xf0\x9f\x98\x80 \xc3\xa9");

  EXPECT_EQ(printable("a\x1b[31mb"), "a\\u001b[31mb");
  EXPECT_EQ(printable(std::string("a\0b\n", 4)), "a\\u0000b\\n");
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\u009b2J") << "C1 CSI as UTF-8";
  EXPECT_EQ(printable("\x9b" "2J"), "\\x9b2J") << "CSI as a raw byte";
  EXPECT_EQ(printable("\xe2\x80\xae"), "\\u202e") << "RIGHT-TO-LEFT OVERRIDE";
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf") << "an overlong '/'";
  EXPECT_EQ(quote(std::string(10'000'000, 'A')), "'" + std::string(kExcerptBytes, 'A') + "'... (10000000 bytes)");
  // Cut before a character that would not fit whole.
  EXPECT_EQ(printable(std::string(kExcerptBytes - 1, 'A') + "\xc3\xa9"),
            std::string(kExcerptBytes - 1, 'A') + "... (" + std::to_string(kExcerptBytes + 1) + " bytes)");
}

// ---- each kind of source, through its parser

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(v >> (8 * i));
  return s;
}

// A safetensors file whose header is `header` as it is (bytes the writer could not write), then data_bytes.
void write_raw_safetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream(path, std::ios::binary) << le64(header.size()) << header << std::string(data_bytes, '\0');
}

TensorToWrite zeros(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {name, dtype, std::move(shape), std::vector<uint8_t>(size_t(n) * dtype_size(dtype))};
}

// A tensor named with ESC sequences (a title change, a screen clear) and a NUL: the NUL cut the message at
// c_str(), the escapes reached the terminal.
TEST(UntrustedText, TensorNameWithEscapesAndNul) {
  test::TempDir dir;
  const std::string path = dir.path("weights.safetensors");
  const std::string name = std::string("evil\x1b]0;owned\x07\x1b[2J") + '\0' + "tail.weight";
  write_safetensors(path, {zeros(name, DType::F32, {2})});
  EXPECT_TRUE(one_printable_line(error_of([&] { WeightStore(SafeTensorsFile::open(path)).check_all_read(); }),
                                 {path, "evil", "tail.weight"}));
  const std::string bad_dtype = cat(R"({")", json(name).dump().substr(1), R"(:{"dtype":"F\u001b[2J32","shape":[1],"data_offsets":[0,4]}})");
  write_raw_safetensors(path, bad_dtype, 4);
  EXPECT_TRUE(one_printable_line(error_of([&] { SafeTensorsFile::open(path); }), {path, "tail.weight", "dtype"}));
}

// LoRA keys with CSI as a C1 character (0xc2 0x9b) and as a raw byte (which the JSON parser refuses).
TEST(UntrustedText, LoraKeyWithCsi) {
  test::TempDir dir;
  TensorSet unet(SafeTensorsFile::build("unet", {{"conv_in.weight", DType::F16, {8, 4, 3, 3}}},
                                        [](size_t, uint8_t* data) { std::memset(data, 0, 8 * 4 * 3 * 3 * 2); }));
  const std::string c1 = dir.path("c1.safetensors"), raw = dir.path("raw.safetensors");
  write_safetensors(c1, {zeros("lora_unet_\xc2\x9b" "2J\x1b[31mred.lora_down.weight", DType::F16, {4, 8})});
  EXPECT_TRUE(one_printable_line(error_of([&] { apply_lora({c1, 1.0f}, unet, nullptr); }),
                                 {c1, "red.lora_down.weight"}));
  write_raw_safetensors(raw, "{\"lora_unet_\x9b" "2J.alpha\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4);
  EXPECT_TRUE(one_printable_line(error_of([&] { apply_lora({raw, 1.0f}, unet, nullptr); }), {raw}));
}

// A 10 MB metadata value was echoed whole.
TEST(UntrustedText, HugeMetadataValue) {
  test::TempDir dir;
  const std::string path = dir.path("checkpoint.safetensors");
  const std::string value = "v\x1b[2J" + std::string(size_t(10) << 20, 'A');
  write_safetensors(path,
                    {zeros("model.diffusion_model.x", DType::F16, {1}), zeros("first_stage_model.x", DType::F16, {1}),
                     zeros("cond_stage_model.transformer.x", DType::F16, {1})},
                    {{"modelspec.prediction_type", value}});
  EXPECT_TRUE(one_printable_line(error_of([&] { read_single_file(SafeTensorsFile::open(path)); }),
                                 {path, "modelspec.prediction_type", cat(value.size(), " bytes")}));
}

// A shape of 100,000 dimensions was echoed whole (300 KB).
TEST(UntrustedText, ShapeOfManyDimensions) {
  test::TempDir dir;
  const std::string path = dir.path("wide.safetensors");
  std::string shape = "1";
  for (int i = 1; i < 100'000; ++i) shape += ",1";
  write_raw_safetensors(path, R"({"t\u001b[1m":{"dtype":"F32","shape":[)" + shape + R"(],"data_offsets":[0,8]}})", 8);
  EXPECT_TRUE(one_printable_line(error_of([&] { SafeTensorsFile::open(path); }),
                                 {path, "'t\\u001b[1m'", "(1, 1, 1, 1, 1, 1, 1, 1, ...) (100000 dims)"}));
}

// merges.txt linked to another text file: its first line was echoed as raw bytes.
TEST(UntrustedText, MergesLineFromASymlinkedFile) {
  test::TempDir dir;
  const fs::path folder = dir.dir() / "tokenizer";
  fs::create_directories(folder);
  std::ofstream(folder / "vocab.json") << R"({"a": 0})";
  std::ofstream(dir.path("passwd"), std::ios::binary)
      << "root:x:0:0:\x1b[31mroot\x9b" "2J\xc2\x9b:/root:/bin/bash" << std::string(5000, 'x') << "\nsecond line\n";
  fs::create_symlink(dir.path("passwd"), folder / "merges.txt");
  EXPECT_TRUE(one_printable_line(error_of([&] { ClipTokenizer::load(folder.string()); }),
                                 {(folder / "merges.txt").string() + " line 1", "root:x:0:0:", "bytes)"}));
}

// Config values and keys with C1 controls (which the JSON escapes let through as characters): rtvd's
// config.json, a diffusers folder's model_index.json.
TEST(UntrustedText, ConfigKeysAndValues) {
  test::TempDir dir;
  json config = json::parse(std::ifstream(test::assets_dir() + "/default/config.json"));
  const std::string label = dir.path("config.json");
  json bad = config;
  bad["dtype"] = "\xc2\x9b" "31mfloat16\x1b[0m";
  EXPECT_TRUE(one_printable_line(error_of([&] { parse_model_config(bad.dump(), label); }), {label, "'dtype'"}));
  bad = config;
  bad["\xc2\x9b" "31munknown"] = 1;
  const std::string unknown = error_of([&] { parse_model_config(bad.dump(), label); });
  EXPECT_TRUE(one_printable_line(unknown, {label, "31munknown"}, 600));  // longer: it lists the 23 known keys

  const std::string index = dir.path("model_index.json");
  std::ofstream(index) << json{{"_class_name", "\xc2\x9b" "2JStableDiffusionPipeline" + std::string(1000, 'x')}}.dump();
  EXPECT_TRUE(one_printable_line(error_of([&] { open_diffusers_folder(dir.dir().string()); }), {index, "'_class_name'"}));

  // The model's name and class names are shown by rtvd info and in --class's error.
  bad = config;
  bad["name"] = "\x1b]0;owned\x07\xc2\x9b" "2J" + std::string(1000, 'n');
  bad["class_names"][3] = "fo\x1b[2Jod";
  const ModelConfig c = parse_model_config(bad.dump(), label);
  EXPECT_TRUE(one_printable_line(c.name, {"owned"}));
  EXPECT_TRUE(one_printable_line(class_names_text(c), {"smileys", "fo\\u001b[2Jod"}));
}

// PNG chunk types are four bytes of the file.
TEST(UntrustedText, PngChunkType) {
  test::TempDir dir;
  const std::string path = dir.path("image.png");
  std::string png = "\x89PNG\r\n\x1a\n";
  const std::string chunk = std::string("\x1b[2J") + "data";
  png += std::string("\0\0\0\4", 4) + chunk;
  const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(chunk.data()), uInt(chunk.size())));
  for (int s = 24; s >= 0; s -= 8) png += char(crc >> s);
  std::ofstream(path, std::ios::binary) << png;
  EXPECT_TRUE(one_printable_line(error_of([&] { read_png(path); }), {path, "'\\u001b[2J'"}));
}

// ---- through the rtvd binary

class UntrustedTextE2E : public testing::Test {
 protected:
  // The default model with config edited by edit and the tensors extra beside its weights.
  std::string model_dir(const std::function<void(json&)>& edit, const std::vector<TensorToWrite>& extra) const {
    const std::string dir = temp_.path(cat("model", ++models_));
    fs::create_directories(dir);
    json config = json::parse(std::ifstream(test::assets_dir() + "/default/config.json"));
    edit(config);
    std::ofstream(dir + "/config.json") << config.dump();
    const SafeTensorsFile weights = SafeTensorsFile::open(test::assets_dir() + "/default/weights.safetensors");
    std::vector<TensorToWrite> tensors = extra;
    for (const TensorView& t : weights.tensors()) tensors.push_back({t.name, t.dtype, t.shape, {t.data, t.data + t.bytes}});
    write_safetensors(dir + "/weights.safetensors", tensors);
    return dir;
  }
  test::RunResult rtvd(const std::vector<std::string>& args) const {
    const fs::path logs = temp_.dir() / cat("logs", ++runs_);
    fs::create_directories(logs);
    return test::run_program(test::rtvd_binary(), args, test::environment(), logs, 120);
  }

  test::TempDir temp_{"rtvd_untrusted"};
  mutable int models_ = 0, runs_ = 0;
};

TEST_F(UntrustedTextE2E, TensorNameIsOneEscapedLine) {
  const std::string name = std::string("evil\x1b]0;owned\x07\x1b[2J") + '\0' + "tail.weight";
  const std::string dir = model_dir([](json&) {}, {zeros(name, DType::F16, {2})});
  const test::RunResult r = rtvd({"info", "--device", "cpu", "--model", dir});
  EXPECT_EQ(r.exit_code, 1) << shown(r.err);
  EXPECT_EQ(r.out, "");
  ASSERT_TRUE(r.err.ends_with("\n")) << shown(r.err);
  EXPECT_TRUE(one_printable_line(r.err.substr(0, r.err.size() - 1),
                                 {"rtvd: error: " + dir + "/weights.safetensors: unexpected tensor 'evil", "tail.weight"}));
}

TEST_F(UntrustedTextE2E, NameAndClassNamesAreEscapedInInfoAndInClassErrors) {
  const std::string dir = model_dir(
      [](json& c) {
        c["name"] = "\x1b]0;owned\x07\xc2\x9b" "2Jmodel";
        c["class_names"][1] = "pe\x1b[2Jople\r";
      },
      {});
  const test::RunResult info = rtvd({"info", "--device", "cpu", "--model", dir});
  ASSERT_EQ(info.exit_code, 0) << shown(info.err);
  for (size_t start = 0, end; (end = info.out.find('\n', start)) != std::string::npos; start = end + 1)
    EXPECT_TRUE(one_printable_line(info.out.substr(start, end - start), {}, 1000));
  EXPECT_NE(info.out.find("pe\\u001b[2Jople\\r"), std::string::npos) << shown(info.out);
  EXPECT_NE(info.out.find("owned"), std::string::npos) << shown(info.out);

  const test::RunResult render = rtvd({"render", "--device", "cpu", "--model", dir, "--class", "nothing", "--frames", "1",
                                       "-o", temp_.path("out.mp4")});
  EXPECT_EQ(render.exit_code, 1) << shown(render.err);
  ASSERT_TRUE(render.err.ends_with("\n")) << shown(render.err);
  EXPECT_TRUE(one_printable_line(render.err.substr(0, render.err.size() - 1), {"--class nothing", "pe\\u001b[2Jople"}));
}

}  // namespace
}  // namespace rtvd
