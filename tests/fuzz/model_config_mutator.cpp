// The mutator of model_config_structured_fuzzer. Byte mutations mostly exercise the JSON parser; this one
// parses each input, changes the values of the real keys (edge integers, wrong types, lists of the wrong
// length, missing and unknown keys, deep nesting, duplicate keys) and writes valid JSON again, and now and
// then repairs the keys' relations, so that edge values reach the cross-key checks and the parameter list.
// Compiled without libFuzzer's coverage: its own branches are not the target's.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/model_files/model_config.h"
#include "tests/fuzz/mutation.h"

namespace rtvd::fuzz {
namespace {

using nlohmann::ordered_json;

enum class Kind { Int, Number, Bool, String, Choice, IntList, BoolList, StringList };
struct Key {
  const char* name;
  Kind kind;
  int64_t bound;  // the largest value model_config.h allows, for sizes
  bool required;
};
// kKnownKeys of pipeline/model_files/model_config.cpp, with the type each is read as and its bound.
constexpr Key kSchema[] = {
    {"name", Kind::String, 0, true},
    {"dtype", Kind::Choice, 0, true},
    {"sample_size", Kind::Int, kMaxFrameSide, true},
    {"in_channels", Kind::Int, kMaxImageChannels, true},
    {"out_channels", Kind::Int, kMaxImageChannels, true},
    {"block_out_channels", Kind::IntList, kMaxChannels, true},
    {"layers_per_block", Kind::Int, kMaxLayersPerBlock, true},
    {"norm", Kind::Choice, 0, true},
    {"norm_num_groups", Kind::Int, kMaxChannels, true},
    {"norm_eps", Kind::Number, 0, false},
    {"attention_levels", Kind::BoolList, 0, true},
    {"mid_attention", Kind::Bool, 0, false},
    {"attention_head_dim", Kind::Int, kMaxChannels, false},
    {"num_attention_heads", Kind::Int, kMaxChannels, false},
    {"transformer_layers_per_block", Kind::Int, kMaxTransformerLayers, false},
    {"cross_attention_dim", Kind::Int, kMaxChannels, false},
    {"context_length", Kind::Int, kMaxContextLength, false},
    {"use_linear_projection", Kind::Bool, 0, false},
    {"num_class_embeds", Kind::Int, kMaxClassEmbeds, false},
    {"class_names", Kind::StringList, 0, false},
    {"flip_sin_to_cos", Kind::Bool, 0, false},
    {"freq_shift", Kind::Number, 0, false},
    {"timestep_scale", Kind::Number, 0, false},
};

// Sizes as real configs have them, so that a repaired config stays small enough to list its parameters.
int64_t plausible_size(Rng& rng) {
  constexpr int64_t kSizes[] = {1, 2, 3, 4, 8, 16, 24, 32, 64, 77, 96, 128, 320, 640, 1024, 1280};
  return rng.pick(kSizes);
}

// A size for a key bounded by `bound`: mostly plausible, else at the bound, just past it, a large divisor
// of it, or at the edges of the integer types.
ordered_json size_value(Rng& rng, int64_t bound) {
  switch (rng.below(10)) {
    case 0: return bound;
    case 1: return bound + 1;
    case 2: return bound - 1 - int64_t(rng.below(3));
    case 3: return std::max<int64_t>(1, bound / int64_t(2 + rng.below(6)));
    case 4:
    case 5: return edge_integer(rng);
    default: return std::min(bound, plausible_size(rng));
  }
}

ordered_json value_of(const Key& key, Rng& rng) {
  const size_t length = rng.chance(10) ? rng.below(40) : rng.below(kMaxLevels + 2);
  ordered_json list = ordered_json::array();
  switch (key.kind) {
    case Kind::Int: return size_value(rng, key.bound);
    case Kind::Number: return edge_number(rng);
    case Kind::Bool: return rng.chance(50);
    case Kind::String: return edge_string(rng);
    case Kind::Choice: {
      constexpr const char* kDtypes[] = {"float16", "float32", "bfloat16", "Float16", ""};
      constexpr const char* kNorms[] = {"batch", "group", "layer", "Group", ""};
      return std::string_view(key.name) == "dtype" ? rng.pick(kDtypes) : rng.pick(kNorms);
    }
    case Kind::IntList:
      for (size_t i = 0; i < length; ++i) list.push_back(size_value(rng, key.bound));
      return list;
    case Kind::BoolList:
      for (size_t i = 0; i < length; ++i) list.push_back(rng.chance(50));
      return list;
    case Kind::StringList:
      for (size_t i = 0; i < length; ++i) list.push_back(edge_string(rng));
      return list;
  }
  return nullptr;
}

// A config that passes every check, with sizes drawn small: the start for inputs that are not configs.
ordered_json fresh_config(Rng& rng) {
  ordered_json c = ordered_json::object();
  c["name"] = "fuzz";
  c["dtype"] = rng.chance(50) ? "float16" : "float32";
  c["sample_size"] = 8;
  c["in_channels"] = 1 + int(rng.below(4));
  c["out_channels"] = 1 + int(rng.below(4));
  const size_t levels = 1 + rng.below(3);
  for (size_t i = 0; i < levels; ++i) {
    c["block_out_channels"].push_back(8 * (1 + int(rng.below(4))));
    c["attention_levels"].push_back(rng.chance(50));
  }
  c["layers_per_block"] = 1 + int(rng.below(2));
  c["norm"] = rng.chance(50) ? "batch" : "group";
  c["norm_num_groups"] = 4;
  c[rng.chance(50) ? "attention_head_dim" : "num_attention_heads"] = 4;
  if (rng.chance(50)) c["cross_attention_dim"] = 8, c["context_length"] = 4;
  if (rng.chance(50)) c["num_class_embeds"] = 3, c["class_names"] = {"a", "b"};
  return c;
}

// An integer value as int64_t (nlohmann holds non-negative ones as unsigned), or fallback.
int64_t as_int(const ordered_json& v, int64_t fallback) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(INT64_MAX) ? int64_t(v.get<uint64_t>()) : fallback;
  return v.is_number_integer() ? v.get<int64_t>() : fallback;
}

bool has_kind(const ordered_json& v, Kind kind) {
  const auto all = [&](auto is) { return v.is_array() && std::all_of(v.begin(), v.end(), is); };
  switch (kind) {
    case Kind::Int: return v.is_number_integer();
    case Kind::Number: return v.is_number();
    case Kind::Bool: return v.is_boolean();
    case Kind::String:
    case Kind::Choice: return v.is_string();
    case Kind::IntList: return all([](const ordered_json& e) { return e.is_number_integer(); });
    case Kind::BoolList: return all([](const ordered_json& e) { return e.is_boolean(); });
    case Kind::StringList: return all([](const ordered_json& e) { return e.is_string(); });
  }
  return false;
}

// Sets every check but the sizes' own ranges to pass, keeping each value where it can: the known keys
// alone, each of its type, the required ones present; then the relations check_consistency tests: one
// attention flag per level, sample_size a multiple of 2^(levels-1), norm_num_groups and the head size
// divisors of the channels, exactly one head key, a context length with cross-attention, one class name
// per non-null class. Sizes stay as they are (edge values included), but for the channels, which are
// brought into range so that the relations can hold.
void repair(ordered_json& c, Rng& rng) {
  ordered_json fixed = ordered_json::object();
  for (const Key& k : kSchema) {
    if (c.contains(k.name) && has_kind(c[k.name], k.kind)) fixed[k.name] = c[k.name];
    else if (k.required) fixed[k.name] = k.kind == Kind::Int ? ordered_json(std::min(k.bound, plausible_size(rng)))
                                                             : value_of(k, rng);
  }
  if (!has_kind(fixed["dtype"], Kind::Choice) || (fixed["dtype"] != "float16" && fixed["dtype"] != "float32"))
    fixed["dtype"] = "float16";
  if (fixed["norm"] != "batch" && fixed["norm"] != "group") fixed["norm"] = "group";

  // Copies, assigned back at the end: ordered_json keeps its keys in a vector, so adding a key moves the
  // others and a reference held across it would dangle.
  ordered_json channels = fixed["block_out_channels"];
  if (channels.empty() || channels.size() > size_t(kMaxLevels)) channels = {32, 64};
  int64_t common = 0;
  for (ordered_json& ch : channels) {
    int64_t v = as_int(ch, 0);
    if (v < 1 || v > kMaxChannels) v = plausible_size(rng);
    ch = v;
    common = std::gcd(common, v);
  }
  ordered_json attention = fixed["attention_levels"];
  while (attention.size() > channels.size()) attention.erase(attention.size() - 1);
  while (attention.size() < channels.size()) attention.push_back(rng.chance(50));
  fixed["block_out_channels"] = channels;
  fixed["attention_levels"] = attention;

  const int64_t multiple = int64_t(1) << (channels.size() - 1);
  const int64_t sample = std::clamp<int64_t>(as_int(fixed["sample_size"], 8), multiple, kMaxFrameSide);
  fixed["sample_size"] = sample / multiple * multiple;
  const int64_t groups = as_int(fixed["norm_num_groups"], 1);
  fixed["norm_num_groups"] = groups > 0 && common % groups == 0 ? groups : common;
  const bool by_dim = fixed.contains("attention_head_dim")
                          ? !fixed.contains("num_attention_heads") || rng.chance(50)
                          : !fixed.contains("num_attention_heads") && rng.chance(50);
  const char* keep = by_dim ? "attention_head_dim" : "num_attention_heads";
  fixed.erase(by_dim ? "num_attention_heads" : "attention_head_dim");
  const int64_t heads = fixed.contains(keep) ? as_int(fixed[keep], 1) : 1;
  fixed[keep] = heads > 0 && common % heads == 0 ? heads : common;
  const auto get = [&](const char* key) { return fixed.contains(key) ? as_int(fixed[key], 0) : 0; };
  if (get("cross_attention_dim") > 0 && get("context_length") < 1) fixed["context_length"] = plausible_size(rng);
  const int64_t classes = get("num_class_embeds");
  if (classes > 1 && classes <= 1000) {
    ordered_json names = ordered_json::array();
    for (int64_t i = 0; i + 1 < classes; ++i) names.push_back(std::to_string(i));
    fixed["class_names"] = names;
  } else {
    fixed.erase("class_names");
  }
  c = std::move(fixed);
}

// One change to a config object.
void mutate_config(ordered_json& c, Rng& rng) {
  const Key& key = rng.pick(kSchema);
  switch (rng.below(10)) {
    case 0:
    case 1: c[key.name] = value_of(key, rng); break;
    case 2: c[key.name] = edge_integer(rng); break;
    case 3: c[key.name] = wrong_value(rng); break;
    case 4: c.erase(key.name); break;
    case 5: {  // a typo'd or foreign key
      constexpr const char* kStrangers[] = {"layer_per_block", "Name", "name ", "", "__metadata__", "upcast_attention"};
      c[rng.pick(kStrangers)] = wrong_value(rng);
      break;
    }
    case 6: {  // one list grows, shrinks or changes an element, and no longer matches the others
      constexpr const char* kLists[] = {"block_out_channels", "attention_levels", "class_names"};
      ordered_json& list = c[rng.pick(kLists)];
      if (!list.is_array()) list = ordered_json::array();
      if (!list.empty() && rng.chance(40)) list.erase(rng.below(list.size()));
      else if (!list.empty() && rng.chance(50)) list[rng.below(list.size())] = rng.chance(70) ? size_value(rng, kMaxChannels) : wrong_value(rng);
      else list.push_back(list.empty() ? ordered_json(32) : list[rng.below(list.size())]);
      break;
    }
    case 7: {  // every channel count scaled by one factor: divisibility holds, sizes reach their bounds
      ordered_json& channels = c["block_out_channels"];
      const int64_t factor = rng.chance(50) ? int64_t(1) << rng.below(14) : 1 + int64_t(rng.below(kMaxChannels));
      int64_t scaled;
      if (channels.is_array())
        for (ordered_json& ch : channels)
          ch = __builtin_mul_overflow(as_int(ch, 1), factor, &scaled) ? std::numeric_limits<int64_t>::max() : scaled;
      break;
    }
    case 8: repair(c, rng); break;
    default: c = fresh_config(rng); break;
  }
}

}  // namespace
}  // namespace rtvd::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  std::string text(reinterpret_cast<const char*>(data), size);
  ordered_json c = parse_object(text);
  if (c.is_null() && rng.chance(30)) c = fresh_config(rng);
  if (c.is_null() || rng.chance(5)) {  // not a config, or by chance: libFuzzer's byte mutations
    mutate_bytes(text, max_size);
    return emit(text, data, max_size);
  }
  for (uint64_t n = 1 + rng.below(3); n > 0; --n) mutate_config(c, rng);
  if (rng.chance(50)) repair(c, rng);
  std::string out = dump(c, rng);
  switch (rng.below(25)) {
    case 0: {  // one value replaced by deep nesting, wherever it sits in the text
      const size_t at = out.find(':', rng.below(out.size()));
      if (at == std::string::npos || out.size() >= max_size) break;
      const size_t end = out.find_first_of(",}", at);
      out.replace(at + 1, end - at - 1, nested_arrays(nesting_depth(rng, max_size - out.size())));
      break;
    }
    case 1: {
      const Key& key = rng.pick(kSchema);
      out = with_duplicate_key(out, key.name, dump(value_of(key, rng), rng));
      break;
    }
    case 2: mutate_bytes(out, max_size); break;
    default: break;
  }
  if (out.size() > max_size) {
    mutate_bytes(text, max_size);
    out = text;
  }
  return emit(out, data, max_size);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                                            uint8_t* out, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  ordered_json x = parse_object({reinterpret_cast<const char*>(a), a_size});
  const ordered_json y = parse_object({reinterpret_cast<const char*>(b), b_size});
  if (x.is_null() || y.is_null()) return 0;
  for (const auto& [key, value] : y.items())  // each key of b replaces a's with even odds
    if (rng.chance(50)) x[key] = value;
  return emit(dump(x, rng), out, max_size);
}
