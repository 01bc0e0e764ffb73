// What the structure-aware fuzzers share: a seeded generator, the values that break size arithmetic, a guard
// that keeps the mutators' own JSON code off deeply nested inputs, and libFuzzer's byte mutator.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipeline/model_files/json_text.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace rtvd::fuzz {

// libFuzzer hands each mutation a seed: everything a mutator draws comes from it, so a run replays.
class Rng {
 public:
  explicit Rng(unsigned seed) : gen_(seed) {}
  uint64_t below(uint64_t n) { return n ? std::uniform_int_distribution<uint64_t>(0, n - 1)(gen_) : 0; }
  int64_t between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  bool chance(unsigned percent) { return below(100) < percent; }
  uint8_t byte() { return uint8_t(below(256)); }
  template <class T, size_t N>
  const T& pick(const T (&options)[N]) {
    return options[below(N)];
  }

 private:
  std::mt19937_64 gen_;
};

// Integers at the edges of int, int64 and uint64 and of their products; JSON carries every one of them
// (nlohmann parses those above 2^63 as unsigned, those below -2^63 as floats).
inline nlohmann::ordered_json edge_integer(Rng& rng) {
  constexpr int64_t kInt = std::numeric_limits<int32_t>::max();
  constexpr int64_t kSigned[] = {0,           1,           -1,          2,           3,
                                 7,           8,           -2,          kInt,        kInt + 1,
                                 -kInt - 1,   -kInt - 2,   46341,       65535,       65536,
                                 1 << 30,     1LL << 31,   1LL << 32,   (1LL << 32) + 1,
                                 1LL << 53,   (1LL << 53) + 1,          1LL << 62,   1000000000,
                                 std::numeric_limits<int64_t>::max(),   std::numeric_limits<int64_t>::min()};
  constexpr uint64_t kUnsigned[] = {uint64_t(1) << 63, (uint64_t(1) << 63) + 1, std::numeric_limits<uint64_t>::max()};
  switch (rng.below(8)) {
    case 0: return rng.pick(kUnsigned);
    case 1: return int64_t(rng.below(uint64_t(1) << rng.below(64)));
    case 2: return -int64_t(rng.below(1000));
    default: return rng.pick(kSigned);
  }
}

// Numbers at the edges of float: denormal, FLT_MAX and just past it, huge doubles, signed zero.
inline nlohmann::ordered_json edge_number(Rng& rng) {
  constexpr double kNumbers[] = {0.0,     -0.0,     1e-45,   1e-38,   1e-5,     0.5,     1.0,   -1.0,
                                 1000.0,  3.4028234663852886e38, 3.5e38,  1e39,   -3.5e38, 1e300, 1e308,
                                 -1e-300, 2.5,      1e-320};
  if (rng.chance(20)) return double(rng.between(-1000000, 1000000)) / 1000.0;
  return rng.pick(kNumbers);
}

// Printable ASCII with now and then an escape that decodes to a control character or a multi-byte one.
inline std::string edge_string(Rng& rng) {
  constexpr const char* kStrings[] = {"", " ", "a", "\n", "\x01", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                      "__metadata__", "dtype", "\"", "\\", "a b", "0"};
  if (rng.chance(50)) return rng.pick(kStrings);
  std::string s(rng.below(rng.chance(10) ? 300 : 12), 'a');
  for (char& c : s) c = char(' ' + rng.below(95));
  return s;
}

// A value of no particular kind: what a mutation swaps in for a value of the wrong type.
inline nlohmann::ordered_json wrong_value(Rng& rng) {
  using nlohmann::ordered_json;
  switch (rng.below(9)) {
    case 0: return nullptr;
    case 1: return rng.chance(50);
    case 2: return edge_string(rng);
    case 3: return ordered_json::array();
    case 4: return ordered_json::object();
    case 5: return 2.0;
    case 6: return ordered_json::array({edge_integer(rng)});
    case 7: return ordered_json{{"a", 1}};
    default: return std::to_string(rng.below(100));
  }
}

// JSON text as an object, or null when it is not one (or nests too deep for the mutators).
inline nlohmann::ordered_json parse_object(std::string_view text) {
  // The mutators' own parse and dump recurse: deeper inputs are mutated as bytes instead.
  if (json_too_deep_at(text, kMaxJsonDepth) != std::string_view::npos) return nullptr;
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
  return j.is_object() ? j : nlohmann::ordered_json(nullptr);
}

inline std::string dump(const nlohmann::ordered_json& j, Rng& rng) {
  return j.dump(rng.chance(20) ? 2 : -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// `depth` arrays around a number: the deep nesting that once overflowed the stack of a recursive dump().
inline std::string nested_arrays(size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

// A depth for nested_arrays that fits in `room` bytes: around the parsers' limit (json_text.h's 64 levels,
// counted with the object around the value) mostly, now and then as deep as it fits.
inline size_t nesting_depth(Rng& rng, size_t room) {
  constexpr size_t kDepths[] = {62, 63, 64, 65, 100, 1000, 100000};
  const size_t fit = room > 2 ? (room - 1) / 2 : 0;
  return std::min(fit, rng.pick(kDepths));
}

// Inserts `"key": value,` right after the opening brace of the object text: nlohmann keeps one of the two
// values, the duplicate key only shows in the text.
inline std::string with_duplicate_key(std::string text, const std::string& key, const std::string& value) {
  const size_t brace = text.find('{');
  if (brace == std::string::npos) return text;
  return text.insert(brace + 1, nlohmann::json(key).dump() + ":" + value + ",");
}

// libFuzzer's own byte mutations on a string, kept within max_size; one call at most doubles it (and so
// does not touch 64 KiB of buffer to mutate a few bytes).
inline void mutate_bytes(std::string& s, size_t max_size) {
  const size_t size = std::min(s.size(), max_size);
  const size_t room = std::max<size_t>(std::min(max_size, 2 * size + 64), 1);
  s.resize(room);
  s.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s.data()), size, room));
}

inline size_t emit(const std::string& s, uint8_t* data, size_t max_size) {
  if (s.size() > max_size) return 0;
  std::memcpy(data, s.data(), s.size());
  return s.size();
}

// The input's size bytes of data mutated byte-wise, in place: what a structured mutator does with an input it
// cannot parse, or now and then by chance.
inline size_t mutate_input_bytes(uint8_t* data, size_t size, size_t max_size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  mutate_bytes(bytes, max_size);
  return emit(bytes, data, max_size);
}

// A structured mutation's output into data, or, when it outgrew max_size, the input mutated byte-wise instead.
inline size_t emit_or_mutate_bytes(const std::string& out, uint8_t* data, size_t size, size_t max_size) {
  return out.size() > max_size ? mutate_input_bytes(data, size, max_size) : emit(out, data, max_size);
}

}  // namespace rtvd::fuzz
