// The mutator of lora_structured_fuzzer. A LoRA is understood only when its keys name the model's modules in
// one of the formats and its factors' shapes fit them, which byte mutations almost never keep; this one
// writes and rewrites keys in every format (diffusers/PEFT, its older spellings, kohya's underscores and
// the original layout's names) for the fuzz model's modules (fuzz_targets.h), near misses of them, factor
// pairs of fitting and unfitting shapes, alphas and diffusers' adapter metadata at edge values. Compiled
// without libFuzzer's coverage: its own branches are not the target's.
#include <cmath>
#include <cstring>

#include "pipeline/model_files/half.h"
#include "tests/fuzz/safetensors_file.h"

namespace rtvd::fuzz {
namespace {

constexpr const char* kFloatTypes[] = {"F32", "F16", "BF16"};

struct Module {
  std::string name;  // diffusers' / transformers' (without "text_model.")
  bool text;
  std::vector<int64_t> shape;
};

std::vector<Module> modules() {
  std::vector<Module> out;
  for (const auto* specs : {&lora_target_unet(), &lora_target_text_encoder()})
    for (const TensorSpec& s : *specs) {
      if (!s.name.ends_with(".weight") || s.shape.size() < 2) continue;
      std::string name = s.name.substr(0, s.name.size() - 7);
      if (name.starts_with("text_model.")) name = name.substr(11);
      out.push_back({name, specs == &lora_target_text_encoder(), s.shape});
    }
  return out;
}

// Small values of a float dtype, now and then a huge one (a product that overflows when merged).
std::string float_bytes(Rng& rng, const char* dtype, uint64_t n) {
  std::string s;
  for (uint64_t i = 0; i < n; ++i) {
    const float v = rng.chance(2) ? 3e19f : float(rng.between(-1000, 1000)) / 4096.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (std::string_view(dtype) == "F32") s.append(reinterpret_cast<const char*>(&bits), 4);
    else {
      const uint16_t h = std::string_view(dtype) == "F16" ? float_to_half(v) : uint16_t(bits >> 16);
      s.append(reinterpret_cast<const char*>(&h), 2);
    }
  }
  return s;
}

void put_floats(File& f, Rng& rng, const std::string& name, const char* dtype, const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  if (n * 4 > kMaxData) return;
  const std::string bytes = float_bytes(rng, dtype, n);
  f.header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {f.data.size(), f.data.size() + bytes.size()}}};
  f.data += bytes;
}

std::string underscored(std::string s) {
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

// The module's key stem and the factor suffixes (down, up) in one of the formats.
struct Spelling {
  std::string stem;
  const char *down, *up;
};

Spelling spelling(const Module& m, Rng& rng) {
  const std::string text_model = rng.chance(50) ? "text_model." : "";
  switch (rng.below(6)) {
    case 0: return {(m.text ? "text_encoder." + text_model : "unet.") + m.name, ".lora_A.weight", ".lora_B.weight"};
    case 1: return {(m.text ? "text_encoder." + text_model : "unet.") + m.name, ".lora.down.weight", ".lora.up.weight"};
    case 2: return {(m.text ? "text_encoder." + text_model : "") + m.name, ".lora_linear_layer.down.weight",
                    ".lora_linear_layer.up.weight"};
    case 3: {  // the attention processor's, where the module is an attention projection
      for (const auto& [proj, old] : {std::pair{".to_q", ".processor.to_q_lora"}, std::pair{".to_out.0", ".processor.to_out_lora"},
                                      std::pair{".q_proj", ".to_q_lora"}, std::pair{".out_proj", ".to_out_lora"}})
        if (m.name.ends_with(proj))
          return {(m.text ? "text_encoder." + text_model : "unet.") + m.name.substr(0, m.name.size() - std::strlen(proj)) + old,
                  ".down.weight", ".up.weight"};
      return {"unet." + m.name, ".lora_A.weight", ".lora_B.weight"};
    }
    default: return {(m.text ? "lora_te_" + underscored(text_model) : "lora_unet_") + underscored(m.name), ".lora_down.weight",
                     ".lora_up.weight"};
  }
}

// A near miss of a name: an index moved, a part dropped, doubled or swapped for another module's.
std::string near_miss(std::string s, Rng& rng) {
  constexpr const char* kWords[] = {"to_k", "attn3", "resnets", "attentions", "ff", "net", "proj", "0", "1", "7", "",
                                    "lora", "processor", "text_model", "weight", "conv", "input_blocks", "1_1"};
  std::vector<size_t> cuts = {0};
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '.' || s[i] == '_') cuts.push_back(i + 1);
  const size_t at = cuts[rng.below(cuts.size())];
  const size_t end = std::min(s.find_first_of("._", at), s.size());
  switch (rng.below(3)) {
    case 0: return s.replace(at, end - at, rng.pick(kWords));
    case 1: return s.erase(at, end - at + (end < s.size()));
    default: return s.insert(at, std::string(rng.pick(kWords)) + (rng.chance(50) ? "." : "_"));
  }
}

void add_update(File& f, Rng& rng, const std::vector<Module>& ms) {
  const Module& m = ms[rng.below(ms.size())];
  const Spelling s = spelling(m, rng);
  const int64_t rank = rng.between(1, 4);
  std::vector<int64_t> down = {rank, m.shape[1]}, up = {m.shape[0], rank};
  if (m.shape.size() == 4) {
    down.insert(down.end(), {m.shape[2], m.shape[3]});
    up.insert(up.end(), {1, 1});
  }
  if (rng.chance(15)) (rng.chance(50) ? down : up)[rng.below(2)] += rng.between(-1, 1);  // a shape that does not fit
  if (rng.chance(10) && down.size() == 4) down.resize(2), up.resize(2);                  // linear factors for a conv
  const char* dtype = rng.pick(kFloatTypes);
  put_floats(f, rng, s.stem + s.down, dtype, down);
  put_floats(f, rng, s.stem + (rng.chance(3) ? s.down : s.up), dtype, up);
  if (rng.chance(40)) {
    const std::string alpha = s.stem.starts_with("lora_") ? s.stem + ".alpha" : s.stem.substr(0, s.stem.find(".processor")) + ".alpha";
    put_floats(f, rng, alpha, rng.pick(kFloatTypes), rng.chance(90) ? std::vector<int64_t>{} : std::vector<int64_t>{2});
  }
}

void rename_tensor(File& f, Rng& rng) {
  const std::vector<std::string> names = tensor_names(f);
  if (names.empty()) return;
  const std::string& old = names[rng.below(names.size())];
  constexpr const char* kSuffixes[] = {".lora_magnitude_vector", ".dora_scale", ".hada_w1_a", ".lora_mid.weight",
                                       ".lora_B.bias", ".alpha", ".lora_down.weight", ".lora_A.weight"};
  std::string name = rng.chance(70) ? near_miss(old, rng) : old.substr(0, old.rfind('.')) + rng.pick(kSuffixes);
  if (name == old || f.header.contains(name)) return;
  ordered_json entry = f.header[old];
  f.header.erase(old);
  f.header[name] = std::move(entry);
}

// diffusers' lora_adapter_metadata: PEFT's LoraConfig per model part, at edge values and types.
void set_adapter_metadata(File& f, Rng& rng, const std::vector<Module>& ms) {
  ordered_json config = ordered_json::object();
  const char* part = rng.chance(70) ? "unet" : rng.chance(50) ? "text_encoder" : "text_encoder_2";
  const auto value = [&]() -> ordered_json {
    return rng.chance(60) ? ordered_json(rng.between(0, 16)) : rng.chance(50) ? edge_number(rng) : wrong_value(rng);
  };
  config[std::string(part) + ".lora_alpha"] = value();
  if (rng.chance(40)) config[std::string(part) + ".alpha_pattern"] = {{ms[rng.below(ms.size())].name, value()}};
  constexpr const char* kSwitches[] = {"use_rslora", "use_dora", "lora_bias", "fan_in_fan_out", "r", "target_modules"};
  if (rng.chance(40)) config[std::string(part) + "." + rng.pick(kSwitches)] = rng.chance(70) ? ordered_json(rng.chance(50)) : wrong_value(rng);
  std::string text = config.dump();
  if (rng.chance(10)) mutate_bytes(text, 2 * text.size() + 16);
  f.header[kMetadata] = {{"format", "pt"}, {"lora_adapter_metadata", text}};
}

void mutate_file(File& f, Rng& rng, const std::vector<Module>& ms) {
  const std::vector<std::string> names = tensor_names(f);
  switch (rng.below(8)) {
    case 0:
    case 1: add_update(f, rng, ms); break;
    case 2:
    case 3: rename_tensor(f, rng); break;
    case 4: if (!names.empty()) f.header.erase(names[rng.below(names.size())]); break;
    case 5: set_adapter_metadata(f, rng, ms); break;
    case 6: poison_value(f, rng); break;
    default: {  // a factor's dtype changed (the bytes laid out again by retile)
      if (names.empty()) break;
      ordered_json& entry = f.header[names[rng.below(names.size())]];
      if (entry.is_object()) entry["dtype"] = rng.chance(80) ? rng.pick(kFloatTypes) : rng.pick(kDTypes).name;
      break;
    }
  }
}

}  // namespace
}  // namespace rtvd::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  static const std::vector<Module> ms = modules();
  Rng rng(seed);
  std::optional<File> file = parse_file(data, size);
  if (!file && rng.chance(50)) file = File{};
  if (!file || rng.chance(5)) {
    return mutate_input_bytes(data, size, max_size);
  }
  for (uint64_t n = 1 + rng.below(3); n > 0; --n) mutate_file(*file, rng, ms);
  if (rng.chance(10)) retile(*file, rng);
  std::string out = rng.chance(90) ? envelope(*file) : serialise(*file, rng, max_size);
  return emit_or_mutate_bytes(out, data, size, max_size);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                                            uint8_t* out, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  std::optional<File> x = parse_file(a, a_size);
  const std::optional<File> y = parse_file(b, b_size);
  if (!x || !y) return 0;
  // b's entries join a's with their bytes: a's data section, then b's, offsets of b's entries moved past a's.
  const uint64_t shift = x->data.size();
  for (const auto& [key, value] : y->header.items()) {
    if (key == kMetadata || !rng.chance(50)) continue;
    ordered_json entry = value;
    if (entry.is_object() && entry.contains("data_offsets") && entry["data_offsets"].is_array())
      for (ordered_json& o : entry["data_offsets"])
        if (o.is_number_unsigned()) o = o.get<uint64_t>() + shift;
    x->header[key] = std::move(entry);
  }
  x->data += y->data;
  return emit(envelope(*x), out, max_size);
}
