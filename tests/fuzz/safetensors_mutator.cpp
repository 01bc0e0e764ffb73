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

#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/mutation.h"

namespace rtvd::fuzz {
namespace {

using nlohmann::ordered_json;

constexpr const char* kMetadata = "__metadata__";
struct DTypeSize {
  const char* name;
  uint64_t size;
};
constexpr DTypeSize kDTypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
// Spellings other readers accept or that sit next to a real one.
constexpr const char* kForeignDTypes[] = {"F8_E4M3", "F8_E5M2", "U16", "U32", "U64", "C64", "f32", "F32 ", "", "F"};
// Bytes a data section may hold after a retile: enough for several tensors, small enough to stay fast.
constexpr uint64_t kMaxData = 1 << 16;

// A file as the mutator sees it: the header as JSON and the data section as bytes.
struct File {
  ordered_json header = ordered_json::object();
  std::string data;
};

std::optional<File> parse_file(const uint8_t* bytes, size_t size) {
  if (size < 8) return std::nullopt;
  const uint64_t length = read_le64(bytes);
  if (length > size - 8) return std::nullopt;
  File f;
  f.header = parse_object({reinterpret_cast<const char*>(bytes + 8), size_t(length)});
  if (f.header.is_null()) return std::nullopt;
  f.data.assign(reinterpret_cast<const char*>(bytes + 8 + length), size - 8 - length);
  return f;
}

std::vector<std::string> tensor_names(const File& f) {
  std::vector<std::string> names;
  for (const auto& [key, value] : f.header.items())
    if (key != kMetadata) names.push_back(key);
  return names;
}

// Bytes a dtype and shape need, or nothing when either is not one the reader accepts or the size is large.
std::optional<uint64_t> entry_bytes(const ordered_json& entry) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape")) return std::nullopt;
  const ordered_json& dtype = entry["dtype"];
  const ordered_json& shape = entry["shape"];
  if (!dtype.is_string() || !shape.is_array()) return std::nullopt;
  uint64_t bytes = 0;
  for (const DTypeSize& d : kDTypes)
    if (dtype.get_ref<const std::string&>() == d.name) bytes = d.size;
  if (bytes == 0) return std::nullopt;
  for (const ordered_json& d : shape)
    if (!d.is_number_unsigned() || __builtin_mul_overflow(bytes, d.get<uint64_t>(), &bytes)) return std::nullopt;
  return bytes;
}

std::string fill_bytes(Rng& rng, uint64_t n) {
  std::string s(n, '\0');
  const uint8_t pattern = rng.byte();
  for (char& c : s) c = char(rng.chance(80) ? pattern : rng.byte());
  return s;
}

// Lays every tensor whose dtype and shape are valid out again, contiguous, in a random order of the data
// section (JSON order is not file order), with fresh bytes: a file the reader accepts, unless a tensor is
// beyond repair.
void retile(File& f, Rng& rng) {
  std::vector<std::string> names = tensor_names(f);
  for (size_t i = names.size(); i > 1; --i) std::swap(names[i - 1], names[rng.below(i)]);
  std::string data;
  for (const std::string& name : names) {
    ordered_json& entry = f.header[name];
    const std::optional<uint64_t> bytes = entry_bytes(entry);
    if (!bytes || *bytes > kMaxData - data.size()) continue;
    entry["data_offsets"] = {data.size(), data.size() + *bytes};
    data += fill_bytes(rng, *bytes);
  }
  f.data = data;
}

ordered_json small_shape(Rng& rng) {
  ordered_json shape = ordered_json::array();
  for (uint64_t rank = rng.below(5); rank > 0; --rank) shape.push_back(rng.below(rng.chance(10) ? 1 : 6));
  return shape;
}

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

// Float tensors get values a loader must notice: NaN, infinities, denormals, -0.
void poison_value(File& f, Rng& rng) {
  const std::vector<std::string> names = tensor_names(f);
  if (names.empty()) return;
  const ordered_json& entry = f.header[names[rng.below(names.size())]];
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("data_offsets")) return;
  const ordered_json& offsets = entry["data_offsets"];
  if (!entry["dtype"].is_string() || !offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    return;
  const std::string& dtype = entry["dtype"].get_ref<const std::string&>();
  const uint64_t begin = offsets[0].get<uint64_t>(), end = std::min<uint64_t>(offsets[1].get<uint64_t>(), f.data.size());
  struct Special {
    const char* dtype;
    size_t size;
    uint64_t bits[5];  // NaN, +inf, -inf, smallest denormal, -0 (little-endian)
  };
  constexpr Special kSpecials[] = {
      {"F64", 8, {0x7ff8000000000001, 0x7ff0000000000000, 0xfff0000000000000, 1, 0x8000000000000000}},
      {"F32", 4, {0x7fc00001, 0x7f800000, 0xff800000, 1, 0x80000000}},
      {"F16", 2, {0x7e01, 0x7c00, 0xfc00, 1, 0x8000}},
      {"BF16", 2, {0x7fc1, 0x7f80, 0xff80, 1, 0x8000}}};
  for (const Special& s : kSpecials) {
    if (dtype != s.dtype || end < begin + s.size) continue;
    const uint64_t at = begin + rng.below((end - begin) / s.size) * s.size;
    const uint64_t bits = s.bits[rng.below(5)];
    for (size_t i = 0; i < s.size; ++i) f.data[at + i] = char(bits >> (8 * i));
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

// The envelope: the length field (usually right), the header text (padded with spaces to a multiple of 8
// as writers do, or not: an unaligned data section), the data section.
std::string serialise(const File& f, Rng& rng, size_t max_size) {
  std::string header = dump(f.header, rng);
  switch (rng.below(20)) {
    case 0: header += std::string(rng.below(8), ' '); break;
    case 1: header = with_duplicate_key(header, tensor_names(f).empty() ? "a" : tensor_names(f)[0], "{}"); break;
    case 2: {  // one value replaced by deep nesting
      const size_t at = header.find(':', rng.below(header.size()));
      if (at == std::string::npos || header.size() + f.data.size() + 8 >= max_size) break;
      const size_t end = header.find_first_of(",}", at);
      header.replace(at + 1, end - at - 1, nested_arrays(nesting_depth(rng, max_size - header.size() - f.data.size() - 8)));
      break;
    }
    case 3: mutate_bytes(header, std::max<size_t>(header.size() * 2, 64)); break;
    default: header.append((8 - header.size() % 8) % 8, ' '); break;
  }
  uint64_t length = header.size();
  if (rng.chance(4)) {  // a length field that lies
    const uint64_t kLengths[] = {0, length - 1, length + 1, length + f.data.size(), 100000001,
                                 uint64_t(1) << 63, std::numeric_limits<uint64_t>::max(), 7};
    length = rng.pick(kLengths);
  }
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char(length >> (8 * i));
  return out + header + f.data;
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
    std::string bytes(reinterpret_cast<const char*>(data), size);
    mutate_bytes(bytes, max_size);
    return emit(bytes, data, max_size);
  }
  for (uint64_t n = 1 + rng.below(3); n > 0; --n) mutate_file(*file, rng);
  if (rng.chance(25)) retile(*file, rng);
  std::string out = serialise(*file, rng, max_size);
  if (out.size() > max_size) {
    out.assign(reinterpret_cast<const char*>(data), size);
    mutate_bytes(out, max_size);
  }
  return emit(out, data, max_size);
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
