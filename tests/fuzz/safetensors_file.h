// A safetensors file as the structure-aware mutators see it (safetensors_mutator.cpp, and those of the
// checkpoint formats built on safetensors: lora_mutator.cpp, single_file_mutator.cpp): the header as JSON and
// the data section as bytes, parsed, laid out again and written back with the envelope's edge cases.
#pragma once
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

using nlohmann::ordered_json;

constexpr const char* kMetadata = "__metadata__";
struct DTypeSize {
  const char* name;
  uint64_t size;
};
constexpr DTypeSize kDTypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
// Bytes a data section may hold after a retile: enough for several tensors, small enough to stay fast.
constexpr uint64_t kMaxData = 1 << 16;

// A file as the mutator sees it: the header as JSON and the data section as bytes.
struct File {
  ordered_json header = ordered_json::object();
  std::string data;
};

inline std::optional<File> parse_file(const uint8_t* bytes, size_t size) {
  if (size < 8) return std::nullopt;
  const uint64_t length = read_le64(bytes);
  if (length > size - 8) return std::nullopt;
  File f;
  f.header = parse_object({reinterpret_cast<const char*>(bytes + 8), size_t(length)});
  if (f.header.is_null()) return std::nullopt;
  f.data.assign(reinterpret_cast<const char*>(bytes + 8 + length), size - 8 - length);
  return f;
}

inline std::vector<std::string> tensor_names(const File& f) {
  std::vector<std::string> names;
  for (const auto& [key, value] : f.header.items())
    if (key != kMetadata) names.push_back(key);
  return names;
}

// Bytes a dtype and shape need, or nothing when either is not one the reader accepts or the size is large.
inline std::optional<uint64_t> entry_bytes(const ordered_json& entry) {
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

inline std::string fill_bytes(Rng& rng, uint64_t n) {
  std::string s(n, '\0');
  const uint8_t pattern = rng.byte();
  for (char& c : s) c = char(rng.chance(80) ? pattern : rng.byte());
  return s;
}

// Lays every tensor whose dtype and shape are valid out again, contiguous, in a random order of the data
// section (JSON order is not file order), with fresh bytes: a file the reader accepts, unless a tensor is
// beyond repair.
inline void retile(File& f, Rng& rng) {
  // The entries themselves, not their names: ordered_json finds a key by a linear search, and a single
  // file's header holds hundreds.
  std::vector<ordered_json*> entries;
  for (auto& [key, value] : f.header.items())
    if (key != kMetadata) entries.push_back(&value);
  for (size_t i = entries.size(); i > 1; --i) std::swap(entries[i - 1], entries[rng.below(i)]);
  std::string data;
  for (ordered_json* e : entries) {
    ordered_json& entry = *e;
    const std::optional<uint64_t> bytes = entry_bytes(entry);
    if (!bytes || *bytes > kMaxData - data.size()) continue;
    entry["data_offsets"] = {data.size(), data.size() + *bytes};
    data += fill_bytes(rng, *bytes);
  }
  f.data = data;
}

inline ordered_json small_shape(Rng& rng) {
  ordered_json shape = ordered_json::array();
  for (uint64_t rank = rng.below(5); rank > 0; --rank) shape.push_back(rng.below(rng.chance(10) ? 1 : 6));
  return shape;
}

// Float tensors get values a loader must notice: NaN, infinities, denormals, -0.
inline void poison_value(File& f, Rng& rng) {
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
    // begin may be anything up to 2^64 - 1: compared without the sum, which would wrap.
    if (dtype != s.dtype || begin > end || end - begin < s.size) continue;
    const uint64_t at = begin + rng.below((end - begin) / s.size) * s.size;
    const uint64_t bits = s.bits[rng.below(5)];
    for (size_t i = 0; i < s.size; ++i) f.data[at + i] = char(bits >> (8 * i));
  }
}

// The envelope exactly as writers make it: the length, the header padded to a multiple of 8, the data.
inline std::string envelope(const File& f) {
  std::string header = f.header.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char(uint64_t(header.size()) >> (8 * i));
  return out + header + f.data;
}

// A tensor of dtype and shape with fresh bytes at the end of the data section, under name (replacing one).
inline void put_tensor(File& f, Rng& rng, const std::string& name, const char* dtype, const ordered_json& shape) {
  ordered_json entry = {{"dtype", dtype}, {"shape", shape}};
  const uint64_t bytes = std::min<uint64_t>(entry_bytes(entry).value_or(0), kMaxData);
  entry["data_offsets"] = {f.data.size(), f.data.size() + bytes};
  f.data += fill_bytes(rng, bytes);
  f.header[name] = entry;
}

// The envelope: the length field (usually right), the header text (padded with spaces to a multiple of 8
// as writers do, or not: an unaligned data section), the data section.
inline std::string serialise(const File& f, Rng& rng, size_t max_size) {
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

}  // namespace rtvd::fuzz
