// JSON that rtvd does not write itself (safetensors headers, LoRAs, config.json, tokenizer files) is parsed
// here and nowhere else, in one pass that inserts each key into its object as it is read. nlohmann's parser is
// iterative, but much of what is done with a value afterwards (dump(), copies, comparisons) recurses once per
// level: 70,000 nested '[' overflow the stack. So the nesting is bounded by a scan of the bytes before nlohmann
// builds anything, the number of values as the value is built, and error messages quote a bounded excerpt of a
// value, never the value.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rtvd {

// Deepest nesting accepted: a safetensors header needs 3 levels, config.json 2, a tokenizer file 4.
constexpr int kMaxJsonDepth = 64;

// Most values (scalars, arrays and objects, nested ones included) in one document. The parsed value takes
// ~100 bytes a value besides the text's long strings (98 for a safetensors header's), so this bounds it to
// ~100 MB whatever the file, where a 100 MB safetensors header of tiny tensors would take ~1 GB. The largest
// files rtvd reads hold a fifth of it: CLIP's tokenizer.json ~200,000 values, a LoRA of 20,000 tensors
// ~180,000 (~9 a tensor).
constexpr size_t kMaxJsonValues = 1'000'000;

// The first repeated key of a document, which nlohmann alone would drop silently (it keeps the last value).
struct DuplicateKeyFinder {
  bool found = false;
  std::string duplicate;     // the first repeated key
  std::string duplicate_in;  // its top-level entry, or empty when the repeated key is top-level itself
};

// The byte at which text's arrays and objects (outside strings) first nest deeper than limit, or npos:
// one pass, no recursion, so it is safe on any input before anything else looks at it.
size_t json_too_deep_at(std::string_view text, int limit);

// text as JSON, one value and nothing after it but white space, in time n log n at worst. Errors, one line
// each: "<where>: JSON nested deeper than 64 levels (at byte N)", "<where>: more than 1000000 JSON values,
// expected at most 1000000 (...)", "<where>: not valid JSON: a NUL byte at byte N" (nlohmann would take it for
// the end of the text, and ignore what follows) and "<where>: not valid JSON: <nlohmann's reason, cut short>".
// duplicates, when given, records the first repeated key at any depth (else the last of repeated keys is kept).
nlohmann::json parse_json(std::string_view text, std::string_view where, DuplicateKeyFinder* duplicates = nullptr);

// v as one line of JSON, its strings escaped as base/quoted_text.h does, cut to max_chars with
// "..."; only that much is ever serialised, so a huge value costs no more than a small one.
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 60);

}  // namespace rtvd
