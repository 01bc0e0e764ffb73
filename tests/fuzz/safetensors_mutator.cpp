// The mutator of safetensors_structured_fuzzer. Byte mutations leave nearly every input failing at the length
// field or in the JSON parser; this one keeps the envelope (length field, JSON header, data section), changes
// the header's entries to edge dtypes, shapes and offsets, and now and then lays the tensors out again
// exactly, so that edge values reach the tiling checks and the data. Compiled without libFuzzer's coverage:
// its own branches are not the target's.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/fuzz/safetensors_file.h"

namespace rtvd::fuzz {
namespace {

// Spellings other readers accept or that sit next to a real one.
constexpr const char* kForeignDTypes[] = {"F8_E4M3", "F8_E5M2", "U16", "U32", "U64", "C64", "f32", "F32 ", "", "F"};

void add_tensor(File& f, Rng& rng) {
  constexpr const char* kNames[] = {"conv_in.weight", "conv_in.bias", "a", "", " ", "\xc3\xa9", "x.y.z", "0"};
  std::string name = rng.chance(70) ? rng.pick(kNames) : edge_string(rng);
  if (f.header.contains(name)) name += std::to_string(rng.below(1000));
  ordered_json entry = {{"dtype", rng.pick(kDTypes).name}, {"shape", small_shape(rng)}};
  const uint64_t bytes = entry_bytes(entry).value_or(0);
  entry["data_offsets"] = {f.data.size(), f.data.size() + bytes};
  f.data += fill_bytes(rng, bytes);
  f.header[name] = entry;
}

// One of the entry's fields, or the entry itself, set to an edge value.
void mutate_entry(ordered_json& entry, Rng& rng) {
  if (!entry.is_object()) {
    entry = ordered_json::object();
    return;
  }
  switch (rng.below(9)) {
    case 0: entry["dtype"] = rng.pick(kDTypes).name; break;
    case 1: entry["dtype"] = rng.chance(70) ? ordered_json(rng.pick(kForeignDTypes)) : wrong_value(rng); break;
    case 2: {  // one dimension at an edge
      ordered_json& shape = entry["shape"];
      if (!shape.is_array() || shape.empty()) shape = small_shape(rng);
      if (!shape.empty()) shape[rng.below(shape.size())] = rng.chance(85) ? edge_integer(rng) : wrong_value(rng);
      break;
    }
    case 3: {  // a dimension more or less
      ordered_json& shape = entry["shape"];
      if (!shape.is_array()) shape = ordered_json::array();
      if (!shape.empty() && rng.chance(50)) shape.erase(rng.below(shape.size()));
      else shape.push_back(rng.chance(50) ? ordered_json(rng.below(4)) : edge_integer(rng));
      break;
    }
    case 4: {  // one offset moved a little or to an edge
      ordered_json& offsets = entry["data_offsets"];
      if (!offsets.is_array() || offsets.size() != 2) offsets = {0, 0};
      ordered_json& o = offsets[rng.below(2)];
      const int64_t at = o.is_number_integer() ? o.get<int64_t>() : 0, step = rng.between(-9, 9);
      int64_t moved;
      o = rng.chance(50) && !__builtin_add_overflow(at, step, &moved) ? ordered_json(moved) : edge_integer(rng);
      break;
    }
    case 5: {  // offsets of the wrong form
      ordered_json& offsets = entry["data_offsets"];
      switch (rng.below(4)) {
        case 0: offsets = {edge_integer(rng)}; break;
        case 1: offsets = {0, 0, 0}; break;
        case 2: if (offsets.is_array() && offsets.size() == 2) offsets = {offsets[1], offsets[0]}; break;
        default: offsets = wrong_value(rng); break;
      }
      break;
    }
    case 6: {
      constexpr const char* kFields[] = {"dtype", "shape", "data_offsets"};
      entry.erase(rng.pick(kFields));
      break;
    }
    case 7: entry[rng.chance(50) ? "offsets" : edge_string(rng)] = wrong_value(rng); break;
    default: entry["shape"] = rng.chance(50) ? ordered_json(ordered_json::array()) : wrong_value(rng); break;
  }
}

void mutate_file(File& f, Rng& rng) {
  const std::vector<std::string> names = tensor_names(f);
  const std::string some = names.empty() ? std::string() : names[rng.below(names.size())];
  switch (rng.below(12)) {
    case 0: add_tensor(f, rng); break;
    case 1: if (!names.empty()) f.header.erase(some); break;
    case 2:
    case 3:
    case 4: if (!names.empty()) mutate_entry(f.header[some], rng); break;
    case 5: retile(f, rng); break;
    case 6: poison_value(f, rng); break;
    case 7: {  // metadata: strings as the format wants, or anything else
      ordered_json& m = f.header[kMetadata];
      if (!m.is_object() || rng.chance(20)) m = rng.chance(50) ? ordered_json::object() : wrong_value(rng);
      if (m.is_object()) m[edge_string(rng)] = rng.chance(80) ? ordered_json(edge_string(rng)) : wrong_value(rng);
      break;
    }
    case 8: {  // the data section grows or shrinks at its end
      const uint64_t n = rng.below(rng.chance(20) ? 4096 : 9);
      if (rng.chance(50)) f.data.append(n, char(rng.byte()));
      else f.data.resize(f.data.size() - std::min<uint64_t>(n, f.data.size()));
      break;
    }
    case 9: {  // a tensor copied under a new name: two tensors over the same bytes
      if (names.empty()) break;
      ordered_json copy = f.header[some];  // a copy first: adding a key moves ordered_json's entries
      f.header[some + "_"] = std::move(copy);
      break;
    }
    case 10: if (!names.empty()) f.header[some] = wrong_value(rng); break;
    default: {  // the data bytes, as bytes
      if (f.data.empty()) break;
      const size_t size = f.data.size();
      mutate_bytes(f.data, size);
      break;
    }
  }
}


File fresh_file(Rng& rng) {
  File f;
  for (uint64_t n = rng.below(4); n > 0; --n) add_tensor(f, rng);
  if (rng.chance(30)) f.header[kMetadata] = {{"format", "pt"}};
  return f;
}

}  // namespace
}  // namespace rtvd::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  std::optional<File> file = parse_file(data, size);
  if (!file && rng.chance(30)) file = fresh_file(rng);
  if (!file || rng.chance(5)) {  // not a file the mutator can parse, or by chance: libFuzzer's byte mutations
    return mutate_input_bytes(data, size, max_size);
  }
  for (uint64_t n = 1 + rng.below(3); n > 0; --n) mutate_file(*file, rng);
  if (rng.chance(25)) retile(*file, rng);
  std::string out = serialise(*file, rng, max_size);
  return emit_or_mutate_bytes(out, data, size, max_size);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                                            uint8_t* out, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  std::optional<File> x = parse_file(a, a_size);
  const std::optional<File> y = parse_file(b, b_size);
  if (!x || !y) return 0;
  for (const auto& [key, value] : y->header.items())  // b's entries join a's, then both are laid out again
    if (rng.chance(50)) x->header[key] = value;
  retile(*x, rng);
  return emit(serialise(*x, rng, max_size), out, max_size);
}
