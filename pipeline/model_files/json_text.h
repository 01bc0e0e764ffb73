// JSON that rtvd does not write itself (safetensors headers, config.json, and later tokenizer and LoRA files)
// is parsed here and nowhere else. nlohmann's parser is iterative, but much of what is done with a value
// afterwards (dump(), copies, comparisons) recurses once per level: 70,000 nested '[' overflow the stack.
// So the nesting is bounded by a scan of the bytes before nlohmann builds anything, and error messages quote
// a bounded excerpt of a value, never the value.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipeline/model_files/json_keys.h"

namespace rtvd {

// Deepest nesting accepted: a safetensors header needs 3 levels, config.json 2, a tokenizer file 4.
constexpr int kMaxJsonDepth = 64;

// The byte at which text's arrays and objects (outside strings) first nest deeper than limit, or npos:
// one pass, no recursion, so it is safe on any input before anything else looks at it.
size_t json_too_deep_at(std::string_view text, int limit);

// text as JSON. Errors, one line each: "<where>: JSON nested deeper than 64 levels (at byte N)" and
// "<where>: not valid JSON: <nlohmann's reason, cut short>". duplicates, when given, is the parse callback
// that records repeated keys (json_keys.h); nlohmann itself keeps the last silently.
nlohmann::json parse_json(std::string_view text, std::string_view where, DuplicateKeyFinder* duplicates = nullptr);

// v as one line of JSON, its strings escaped as kernels/common/quoted_text.h does, cut to max_chars with
// "..."; only that much is ever serialised, so a huge value costs no more than a small one.
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 60);

}  // namespace rtvd
