// The entry points of the fuzzers (tests/fuzz/*_fuzzer.cpp), shared with tests/fuzz_regression_test.cpp so
// that a saved crash replays through exactly the code that found it. Each one parses hostile bytes, uses the
// result as rtvd would, and checks what the parser's header promises; a broken promise aborts, which the
// fuzzer reports as a crash. A rejected input throws rtvd::Error and is left to the caller: any other
// exception, like a crash, is a defect.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/graph/weights.h"
#include "pipeline/io/png.h"
#include "pipeline/model_files/clip_text_config.h"
#include "pipeline/model_files/controlnet_single_file.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/model_files/lora.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/single_file.h"
#include "pipeline/models/unet.h"
#include "pipeline/text/clip_tokenizer.h"
#include "pipeline/text/unicode_text.h"

namespace rtvd::fuzz {

inline void expect(bool holds, const char* promise) {
  if (holds) return;
  std::fprintf(stderr, "fuzz: broken promise: %s\n", promise);
  std::abort();
}

// Reads a range's first and last byte, so that ASan checks that the range lies inside its allocation.
inline void touch(const uint8_t* p, size_t n) {
  if (n == 0) return;
  [[maybe_unused]] volatile uint8_t first = p[0], last = p[n - 1];
}

inline uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline uint32_t read_be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// Whether s is well-formed UTF-8, by the Unicode standard's table of byte ranges (3-7): a second opinion on
// decode_utf8.
inline bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = uint8_t(s[i]);
    size_t n = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range
    if (b < 0x80) n = 0;
    else if (b >= 0xC2 && b <= 0xDF) n = 1;
    else if (b >= 0xE0 && b <= 0xEF) n = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) n = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else return false;
    if (s.size() - i - 1 < n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto c = uint8_t(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n + 1;
  }
  return true;
}

// The promise of every entry point besides its parser's: a rejected input's message is one line of printable
// UTF-8 (no C0 or C1 control, no DEL, no line or paragraph separator) of at most kMaxErrorBytes, whatever names
// and values the input holds, as base/quoted_text.h makes it. (A NUL would cut what() short unseen:
// the escaper's own test, tests/untrusted_text_test.cpp, checks that none gets through.)
constexpr size_t kMaxErrorBytes = 2048;
inline void expect_printable_error(const Error& e) {
  const std::string_view m = e.what();
  expect(m.size() <= kMaxErrorBytes, "an error message is at most 2048 bytes");
  expect(is_utf8(m), "an error message is UTF-8");
  for (size_t i = 0; i < m.size();) {
    const auto b = uint8_t(m[i]);
    const size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? b : b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) c = c << 6 | (uint8_t(m[i + k]) & 0x3F);
    expect(c >= 0x20 && !(c >= 0x7F && c <= 0x9F) && c != 0x2028 && c != 0x2029,
           "an error message is one printable line");
    i += n;
  }
}

// safetensors.h: every tensor lies inside the data section, and sorted they tile it exactly; get() finds
// each by its own dtype and shape; a file rebuilt from the tensors (SafeTensorsFile::build, the writer's
// header) parses back to the same tensors. weights.h, what load_model does next: a WeightStore takes only
// finite weights, so every value it reads back is finite.
inline void safetensors(std::span<const uint8_t> bytes) try {
  // A heap block of exactly the input's size: ASan flags a read one byte past the end.
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  const SafeTensorsFile file = SafeTensorsFile::from_memory(copy.data(), copy.size(), "fuzz input");
  const uint8_t* end = copy.data() + copy.size();
  const uint8_t* next = copy.data() + 8 + read_le64(copy.data());  // the data section
  std::vector<TensorSpec> specs;
  uint64_t total = 0;
  for (const TensorView& t : file.tensors()) {
    expect(t.data == next && t.bytes <= size_t(end - t.data), "tensors tile the data section in file order");
    next = t.data + t.bytes;
    expect(uint64_t(t.numel()) * dtype_size(t.dtype) == t.bytes, "numel x dtype size is the byte count");
    touch(t.data, t.bytes);
    expect(file.find(t.name) == &t && &file.get(t.name, t.dtype, t.shape) == &t, "get finds every tensor");
    specs.push_back({t.name, t.dtype, t.shape});
    total += t.bytes;
  }
  expect(next == end, "the tensors end where the input ends");

  // The round trip and the reads allocate the data again: only for inputs of fuzzing size.
  if (total > (1u << 20)) return;
  WeightStore store(file);
  for (const TensorView& t : file.tensors()) {
    if (t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F32) continue;
    for (float v : store.read(t.name, t.shape)) expect(std::isfinite(v), "a WeightStore reads only finite weights");
  }

  const std::vector<TensorView>& tensors = file.tensors();
  const SafeTensorsFile rebuilt = SafeTensorsFile::build(
      "fuzz rebuild", specs, [&](size_t i, uint8_t* out) { std::memcpy(out, tensors[i].data, tensors[i].bytes); });
  expect(rebuilt.tensors().size() == tensors.size(), "a rebuilt file holds the same tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& a = tensors[i];
    const TensorView* b = rebuilt.find(a.name);
    expect(b && b->dtype == a.dtype && b->shape == a.shape && b->bytes == a.bytes &&
               (a.bytes == 0 || std::memcmp(a.data, b->data, a.bytes) == 0),
           "a rebuilt tensor equals the original");
  }
} catch (const Error& e) {
  expect_printable_error(e);
  throw;
}

// model_config.h: a parsed config is consistent (one attention level per block level, exactly one of head
// dim and head count, divisible channels, sample_size a multiple of size_multiple()), and the U-Net's
// parameter list for it (what load_model checks the weights against) can be made.
inline void model_config(std::span<const uint8_t> bytes) try {
  const ModelConfig c = parse_model_config(std::string(bytes.begin(), bytes.end()), "fuzz input");
  expect(c.levels() >= 1 && c.attention_levels.size() == c.block_out_channels.size(),
         "one attention flag per block level");
  expect((c.attention_head_dim > 0) != (c.num_attention_heads > 0),
         "exactly one of attention_head_dim and num_attention_heads");
  expect(c.sample_size > 0 && c.sample_size % c.size_multiple() == 0, "sample_size is a multiple of size_multiple()");
  expect(c.time_embed_dim() > 0, "a positive time embedding width");
  for (int i = 0; i < c.levels(); ++i) {
    const int channels = c.block_out_channels[i];
    const bool attention = c.attention_levels[i] || (c.mid_attention && i == c.levels() - 1);
    if (!attention) continue;
    const int heads = c.heads_for(channels);
    expect(heads > 0 && channels % heads == 0, "attention heads divide the channels");
  }
  if (c.num_class_embeds > 0) expect(c.null_class() >= 0, "a null class");
  for (const TensorSpec& p : unet_parameters(c))
    for (int64_t d : p.shape) expect(d > 0, "every parameter dimension is positive");
} catch (const Error& e) {
  expect_printable_error(e);
  throw;
}

// An in-memory file: read_png takes a path, and a memfd gives one without touching the disk.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("rtvd_fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create: ", std::strerror(errno));
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }
  void assign(std::span<const uint8_t> bytes) {
    if (ftruncate(fd_, 0) != 0 || (bytes.size() && pwrite(fd_, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size())))
      fail("memfd write: ", std::strerror(errno));
  }

 private:
  int fd_;
};

// png.h: a decoded image has the size its IHDR gives and 4 bytes a pixel, and write_png's output decodes
// back to the same pixels.
inline void png(std::span<const uint8_t> bytes) try {
  static MemFile file;
  file.assign(bytes);
  const ImageRgba8 image = read_png(file.path());
  expect(image.width > 0 && image.height > 0 &&
             image.pixels.size() == size_t(image.width) * size_t(image.height) * 4,
         "a decoded image holds width x height RGBA pixels");
  expect(bytes.size() >= 24 && uint32_t(image.width) == read_be32(&bytes[16]) &&
             uint32_t(image.height) == read_be32(&bytes[20]),
         "the decoded size is the IHDR's");

  // The round trip filters and compresses again, the most costly step here: small images only.
  if (image.pixels.size() > (1u << 14)) return;
  write_png(file.path(), image);
  const ImageRgba8 again = read_png(file.path());
  expect(again.width == image.width && again.height == image.height && again.pixels == image.pixels,
         "write_png's output decodes to the same pixels");
} catch (const Error& e) {
  expect_printable_error(e);
  throw;
}

// ---- checkpoint formats on safetensors: LoRA files and single-file checkpoints

// The model a fuzzed LoRA updates: a module of each kind an SD U-Net and a CLIP text encoder have (the text
// encoder under "text_model.", as older transformers saved it), small. make_seeds.py writes LoRAs of it.
inline const std::vector<TensorSpec>& lora_target_unet() {
  static const std::vector<TensorSpec> specs = {
      {"conv_in.weight", DType::F16, {8, 4, 3, 3}},
      {"conv_in.bias", DType::F16, {8}},
      {"time_embedding.linear_1.weight", DType::F16, {32, 8}},
      {"down_blocks.0.resnets.0.conv1.weight", DType::F16, {8, 8, 3, 3}},
      {"down_blocks.0.resnets.0.time_emb_proj.weight", DType::F16, {8, 32}},
      {"down_blocks.0.attentions.0.proj_in.weight", DType::F16, {8, 8}},
      {"down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight", DType::F16, {8, 8}},
      {"down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight", DType::F16, {8, 16}},
      {"down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_out.0.weight", DType::F16, {8, 8}},
      {"down_blocks.0.attentions.0.transformer_blocks.0.ff.net.0.proj.weight", DType::F16, {64, 8}},
      {"down_blocks.0.downsamplers.0.conv.weight", DType::F16, {8, 8, 3, 3}},
      {"mid_block.attentions.0.proj_out.weight", DType::F16, {8, 8, 1, 1}},
      {"up_blocks.0.resnets.0.conv_shortcut.weight", DType::F16, {8, 16, 1, 1}},
      {"up_blocks.0.upsamplers.0.conv.weight", DType::F16, {8, 8, 3, 3}},
  };
  return specs;
}
inline const std::vector<TensorSpec>& lora_target_text_encoder() {
  static const std::vector<TensorSpec> specs = {
      {"text_model.embeddings.token_embedding.weight", DType::F16, {10, 16}},
      {"text_model.encoder.layers.0.self_attn.q_proj.weight", DType::F16, {16, 16}},
      {"text_model.encoder.layers.0.self_attn.out_proj.weight", DType::F16, {16, 16}},
      {"text_model.encoder.layers.0.mlp.fc1.weight", DType::F16, {32, 16}},
      {"text_model.encoder.layers.0.mlp.fc2.weight", DType::F16, {16, 32}},
  };
  return specs;
}

// The weights: small finite halves (specs are F16).
inline TensorSet lora_target_set(const char* label, const std::vector<TensorSpec>& specs) {
  return TensorSet(SafeTensorsFile::build(label, specs, [&](size_t i, uint8_t* data) {
    size_t n = 1;
    for (int64_t d : specs[i].shape) n *= size_t(d);
    for (size_t k = 0; k < n; ++k) {
      const uint16_t h = uint16_t(0x2000 + 37 * k % 0x1000);
      std::memcpy(data + 2 * k, &h, 2);
    }
  }));
}

// lora.h: a file is merged or refused with an error that names it; what it merges reads back, through a
// WeightStore, as finite weights of the model's shapes, or the read says which update made a weight
// non-finite; the set of updated weights is within the model.
inline void lora(std::span<const uint8_t> bytes) try {
  static MemFile file;
  file.assign(bytes);
  static const TensorSet unet0 = lora_target_set("fuzz unet", lora_target_unet());
  static const TensorSet text0 = lora_target_set("fuzz text encoder", lora_target_text_encoder());
  TensorSet unet = unet0, text = text0;
  const std::string path = file.path();
  try {
    apply_lora({path, 0.7f}, unet, &text);
  } catch (const Error& e) {
    expect(std::string_view(e.what()).starts_with(path), "a LoRA error names its file");
    throw;
  }
  for (TensorSet* set : {&unet, &text}) {
    const TensorSet& before = set == &unet ? unet0 : text0;
    expect(set->tensors().size() == before.tensors().size(), "a LoRA adds no tensor to the model");
    WeightStore store(*set);
    for (const TensorView& t : set->tensors()) {
      if (!set->deltas(t.name)) continue;
      try {
        for (float v : store.read(t.name, t.shape)) expect(std::isfinite(v), "merged weights are finite");
      } catch (const Error& e) {
        expect(std::string_view(e.what()).starts_with(path) && std::string_view(e.what()).find("makes element") != std::string::npos,
               "a merge fails only on an update that makes a weight non-finite, naming the LoRA");
      }
    }
  }
} catch (const Error& e) {
  expect_printable_error(e);
  throw;
}

// single_file.h: a file maps, or is refused with an error that names it; each component's tensors are views
// inside their tensors of the file (named by source_name; SDXL's transposed text_projection a copy of its
// tensor's size), of their own dtype and byte count; the configs are JSON objects, and the U-Net's and the text
// encoders' go through the parsers of a diffusers folder's, the U-Net's on to the parameter list the builder
// checks the tensors against.
inline void single_file(std::span<const uint8_t> bytes) try {
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  const SafeTensorsFile file = SafeTensorsFile::from_memory(copy.data(), copy.size(), "fuzz input");
  const SingleFileCheckpoint c = [&] {
    try {
      return read_single_file(file);  // a copy: the same views
    } catch (const Error& e) {
      expect(std::string_view(e.what()).starts_with("fuzz input"), "a single-file error names the file");
      throw;
    }
  }();
  const bool sdxl = !c.text_encoder_2.tensors.tensors().empty();
  std::vector<const SingleFileComponent*> components = {&c.unet, &c.vae, &c.text_encoder};
  if (sdxl) components.push_back(&c.text_encoder_2);
  for (const SingleFileComponent* component : components) {
    for (const TensorView& t : component->tensors.tensors()) {
      const TensorView* source = file.find(component->tensors.source_name(t.name));
      expect(source != nullptr, "every tensor of a component is a tensor of the file, renamed");
      const bool copied = component == &c.text_encoder_2 && t.name == "text_projection.weight";
      expect(t.dtype == source->dtype && t.bytes <= source->bytes &&
                 (copied || (t.data >= source->data && size_t(t.data - source->data) <= source->bytes - t.bytes)),
             "a component's tensor is a view inside its tensor in the file (or a copy of its size)");
      expect(uint64_t(t.numel()) * dtype_size(t.dtype) == t.bytes, "numel x dtype size is the byte count");
      touch(t.data, t.bytes);
    }
    expect(nlohmann::json::parse(component->config_json, nullptr, false).is_object(), "each config is a JSON object");
  }
  const ModelConfig cfg = parse_diffusers_unet_config(c.unet.config_json, c.unet.config_label, DType::F16);
  for (const TensorSpec& p : unet_parameters(cfg))
    for (int64_t d : p.shape) expect(d > 0, "every parameter dimension is positive");
  parse_clip_text_config(c.text_encoder.config_json, c.text_encoder.config_label);
  if (sdxl) parse_clip_text_config(c.text_encoder_2.config_json, c.text_encoder_2.config_label);
} catch (const Error& e) {
  expect_printable_error(e);
  throw;
}

// controlnet_single_file.h, on the single-file fuzzers' inputs too: a file maps as a ControlNet, or is refused
// with an error that names it; every tensor is a view inside its tensor of the file (its source_name), of its
// dtype and byte count; the config is a JSON object of ControlNetModel, its hint block's widths positive.
inline void controlnet_single_file(std::span<const uint8_t> bytes) try {
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  const SafeTensorsFile file = SafeTensorsFile::from_memory(copy.data(), copy.size(), "fuzz input");
  const ControlNetSingleFile c = [&] {
    try {
      return read_controlnet_single_file(file);  // a copy: the same views
    } catch (const Error& e) {
      expect(std::string_view(e.what()).starts_with("fuzz input"), "a ControlNet error names the file");
      throw;
    }
  }();
  for (const TensorView& t : c.controlnet.tensors.tensors()) {
    const TensorView* source = file.find(c.controlnet.tensors.source_name(t.name));
    expect(source != nullptr, "every tensor of a ControlNet is a tensor of the file, renamed");
    expect(t.dtype == source->dtype && t.bytes == source->bytes && t.data == source->data,
           "a ControlNet's tensor is its tensor in the file");
    touch(t.data, t.bytes);
  }
  const nlohmann::json config = nlohmann::json::parse(c.controlnet.config_json, nullptr, false);
  expect(config.is_object() && config.value("_class_name", "") == "ControlNetModel", "the config is a ControlNetModel's");
  expect(config.at("conditioning_channels").get<int64_t>() > 0, "the control image has channels");
  for (const nlohmann::json& width : config.at("conditioning_embedding_out_channels"))
    expect(width.get<int64_t>() > 0, "every width of the hint block is positive");
} catch (const Error& e) {
  expect_printable_error(e);
  throw;
}

// ---- the CLIP tokenizer

// A tokenizer input: the prompt, then each file of a tokenizer folder as a line "==> NAME <==" and its text,
// as `head` prints several files. With no file, only the built-in vocabulary encodes the prompt.
constexpr std::string_view kFileMark = "\n==> ", kFileMarkEnd = " <==\n";
struct TokenizerInput {
  std::string_view prompt;
  std::map<std::string, std::string_view> files;  // by name; a later file of the same name replaces
};

inline TokenizerInput split_tokenizer_input(std::string_view bytes) {
  TokenizerInput in;
  size_t at = bytes.find(kFileMark);
  in.prompt = bytes.substr(0, at);
  while (at != std::string_view::npos) {
    const size_t start = at + kFileMark.size();
    at = bytes.find(kFileMark, start);
    const std::string_view part = bytes.substr(start, at - start);
    const size_t end = part.find(kFileMarkEnd);  // a part without it names no file and is left out
    if (end != std::string_view::npos)
      in.files[std::string(part.substr(0, end))] = part.substr(end + kFileMarkEnd.size());
  }
  return in;
}

// CLIP's byte characters (bytes_to_unicode of its simple_tokenizer.py), written again rather than taken from
// clip_tokenizer.cpp, so that the check does not share its bugs: the printable Latin-1 bytes stand for
// themselves, the other 68 for U+0100 + n in byte order. Each character's byte.
inline std::map<char32_t, uint8_t> clip_byte_of_unit() {
  std::map<char32_t, uint8_t> byte_of;
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_of[printable ? char32_t(b) : next++] = uint8_t(b);
  }
  return byte_of;
}

// clip_tokenizer.h, for one text and a tokenizer whose added tokens are `added`: text that is not UTF-8 is
// an rtvd::Error, other text is not; encode() is BOS, ids, EOS, every id a token; the ids spell the text,
// steps 1 to 4: each added token (leftmost-longest) as its id, each piece between as its NFC, lowercased
// bytes without white space, in CLIP's byte characters, a word's last token ending in </w>; encode_context()
// is encode() cut to BOS, 75 ids, EOS, padded to 77, and counts what it cut. Returns encode(text).
inline std::vector<int32_t> check_encoding(const ClipTokenizer& t, std::string_view text,
                                           std::vector<std::string> added) {
  std::vector<int32_t> ids;
  try {
    ids = t.encode(text);
  } catch (const Error&) {
    expect(!is_utf8(text), "only text that is not UTF-8 is an rtvd::Error");
    return {};
  }
  expect(is_utf8(text), "text that is not UTF-8 is an rtvd::Error");
  const std::vector<std::string>& tokens = t.tokens();
  expect(ids.size() >= 2 && ids.front() == t.bos_id() && ids.back() == t.eos_id(), "BOS, the ids, EOS");
  for (const int32_t id : ids) expect(id >= 0 && size_t(id) < tokens.size(), "every id is a token");

  static const std::map<char32_t, uint8_t> byte_of = clip_byte_of_unit();
  size_t next = 1;  // the next id to spell with
  const auto spell = [&](std::string_view piece) {
    std::u32string kept;
    for (const char32_t c : nfc(decode_utf8(piece, "fuzz text")))
      if (!is_white_space(c)) kept += c;
    const std::string want = encode_utf8(to_lower(kept));
    std::string got;
    bool word_end = true;
    while (got.size() < want.size() && next + 1 < ids.size()) {
      std::string_view token = tokens[ids[next++]];
      word_end = token.ends_with("</w>");
      if (word_end) token.remove_suffix(4);
      for (const char32_t c : decode_utf8(token, "fuzz token")) {
        const auto it = byte_of.find(c);
        expect(it != byte_of.end(), "a word's tokens are CLIP's byte characters");
        got += char(it->second);
      }
    }
    expect(got == want && word_end, "the ids spell the normalized text, a word's last token ending in </w>");
  };
  std::sort(added.begin(), added.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto hit =
        std::find_if(added.begin(), added.end(), [&](const std::string& a) { return text.substr(i).starts_with(a); });
    if (hit == added.end()) {
      ++i;
      continue;
    }
    spell(text.substr(start, i - start));
    expect(next + 1 < ids.size() && tokens[ids[next++]] == *hit, "an added token in the text is its id");
    start = i += hit->size();
  }
  spell(text.substr(start));
  expect(next + 1 == ids.size(), "nothing but EOS after the text's ids");

  const ContextTokens context = t.encode_context(text);
  constexpr size_t n = ClipTokenizer::kContextLength;
  expect(context.ids.size() == n, "encode_context gives 77 ids");
  expect(size_t(context.dropped) == (ids.size() > n ? ids.size() - n : 0), "dropped counts the ids cut");
  for (size_t i = 0; i < n; ++i) {
    const int32_t want = i < ids.size() ? (i + 1 == n ? t.eos_id() : ids[i]) : t.pad_id();
    expect(context.ids[i] == want, "encode_context is encode cut to 75 tokens between BOS and EOS, then padding");
  }
  return ids;
}

// Runs f, where an rtvd::Error is a broken promise rather than a rejected input.
template <class F>
void must_not_fail(const char* promise, const F& f) {
  try {
    f();
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz: %s\n", e.what());
    expect(false, promise);
  }
}

// A tokenizer from files, written out again from tokens() and merges() in the other layout: as vocab.json
// with merges.txt when it came from tokenizer.json, unless it has added tokens besides BOS, EOS and the pad
// (which only tokenizer.json holds) or a merge that merges.txt cannot hold (an empty token, one with a space
// or a line break); else as tokenizer.json, merges as pairs, with the input's added_tokens. It loads to the
// same tokenizer, and encodes text to ids, what t encoded it to (none where text is not UTF-8). added_tokens:
// tokenizer.json's, or nullptr where the input had vocab.json.
inline void check_rewritten(const ClipTokenizer& t, const nlohmann::json* added_tokens, std::string_view text,
                            const std::vector<int32_t>& ids) {
  nlohmann::json vocab = nlohmann::json::object(), pairs = nlohmann::json::array();
  for (size_t id = 0; id < t.tokens().size(); ++id) vocab[t.tokens()[id]] = id;
  std::string merges_txt = "#version: 0.2\n";
  bool as_vocab_json = added_tokens != nullptr;
  if (added_tokens && added_tokens->is_array())
    for (const nlohmann::json& a : *added_tokens) {
      const std::string& s = a.at("content").get_ref<const std::string&>();
      as_vocab_json = as_vocab_json && (s == "<|startoftext|>" || s == "<|endoftext|>" || s == t.tokens()[t.pad_id()]);
    }
  for (const auto& [a, b] : t.merges()) {
    pairs.push_back({a, b});
    merges_txt += a + " " + b + "\n";
    for (const std::string& side : {a, b})
      as_vocab_json = as_vocab_json && !side.empty() && side.find_first_of(" \r\n") == std::string::npos;
  }
  std::map<std::string, std::string> files = {
      {"special_tokens_map.json", nlohmann::json{{"pad_token", t.tokens()[t.pad_id()]}}.dump()}};
  if (as_vocab_json) {
    files["vocab.json"] = vocab.dump();
    files["merges.txt"] = merges_txt;
  } else {
    const nlohmann::json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", pairs}, {"end_of_word_suffix", "</w>"}};
    files["tokenizer.json"] =
        nlohmann::json{{"model", model}, {"added_tokens", added_tokens ? *added_tokens : nullptr}}.dump();
  }
  const ClipTokenizer again = ClipTokenizer::from_files("fuzz rewrite", [&](const std::string& name) {
    const auto it = files.find(name);
    return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  expect(again.tokens() == t.tokens() && again.merges() == t.merges() && again.bos_id() == t.bos_id() &&
             again.eos_id() == t.eos_id() && again.pad_id() == t.pad_id(),
         "a tokenizer written from tokens() and merges() loads to the same tokens, merges and special ids");
  if (!ids.empty()) expect(again.encode(text) == ids, "a rewritten tokenizer encodes the same");
}

// clip_tokenizer.h: the built-in vocabulary encodes any text as promised (check_encoding); a tokenizer folder
// loads, or fails with an error naming its file; what loads names BOS and EOS by their tokens and a pad id
// that is a token, encodes as promised, and loads the same from its tokens and merges written out again.
inline void clip_tokenizer(std::span<const uint8_t> bytes) try {
  const TokenizerInput in = split_tokenizer_input({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
  must_not_fail("the built-in vocabulary encodes any text, or rejects what is not UTF-8", [&] {
    // Built once: its 49,408 tokens take far longer than an execution should.
    static const ClipTokenizer builtin = ClipTokenizer::builtin();
    check_encoding(builtin, in.prompt, {"<|startoftext|>", "<|endoftext|>"});
  });
  if (in.files.empty()) return;

  constexpr std::string_view kFolder = "fuzz-tokenizer";
  const auto read = [&](const std::string& name) -> std::optional<std::string> {
    const auto it = in.files.find(name);
    return it == in.files.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const ClipTokenizer t = [&] {
    try {
      return ClipTokenizer::from_files(std::string(kFolder), read);
    } catch (const Error& e) {
      expect(std::string_view(e.what()).starts_with(kFolder), "a loading error names its file");
      throw;
    }
  }();
  const std::vector<std::string>& tokens = t.tokens();
  expect(size_t(t.bos_id()) < tokens.size() && tokens[t.bos_id()] == "<|startoftext|>" &&
             size_t(t.eos_id()) < tokens.size() && tokens[t.eos_id()] == "<|endoftext|>" &&
             size_t(t.pad_id()) < tokens.size(),
         "BOS and EOS are their tokens, the pad id a token");

  // The added tokens: BOS, EOS, the pad token, and tokenizer.json's added_tokens, which loaded, so are valid.
  std::vector<std::string> added = {"<|startoftext|>", "<|endoftext|>", tokens[t.pad_id()]};
  nlohmann::json added_tokens;
  if (const auto file = in.files.find("tokenizer.json"); file != in.files.end()) {
    added_tokens = nlohmann::json::parse(file->second).value("added_tokens", nlohmann::json());
    if (added_tokens.is_array())
      for (const nlohmann::json& a : added_tokens) added.push_back(a.at("content").get<std::string>());
  }
  std::vector<int32_t> ids;
  must_not_fail("a tokenizer that loaded encodes any text, or rejects what is not UTF-8",
                [&] { ids = check_encoding(t, in.prompt, added); });
  must_not_fail("a tokenizer written from tokens() and merges() loads", [&] {
    check_rewritten(t, in.files.contains("tokenizer.json") ? &added_tokens : nullptr, in.prompt, ids);
  });
} catch (const Error& e) {
  expect_printable_error(e);
  throw;
}

}  // namespace rtvd::fuzz
