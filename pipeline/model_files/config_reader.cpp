#include "pipeline/model_files/config_reader.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/input_file.h"
#include "pipeline/model_files/json_text.h"

namespace rtvd {

using nlohmann::json;

// null is its own type's one value: named once.
std::string describe_json(const json& v) { return v.is_null() ? "null" : cat(v.type_name(), " ", json_excerpt(v)); }

std::string read_config_file(const std::string& path) { return read_regular_file(path, kMaxConfigBytes, "a config"); }

json parse_config_object(std::string_view text, const std::string& label) {
  if (text.size() > kMaxConfigBytes)
    fail(label, ": ", text.size(), " bytes, expected a config of at most ", kMaxConfigBytes, " bytes");
  DuplicateKeyFinder duplicates;
  json root = parse_json(text, label, &duplicates);
  if (!root.is_object()) fail(label, ": expected a JSON object at the top level, got ", describe_json(root));
  if (duplicates.found) fail(label, ": key ", quote(duplicates.duplicate), " appears twice");
  return root;
}

void ConfigReader::fail_key(std::string_view key, std::string_view expected, std::string_view got) const {
  fail(label_, ": key ", quote(key), ": expected ", expected, ", got ", got);
}

void ConfigReader::reject_unknown_keys(std::span<const std::string_view> known,
                                       std::span<const std::string_view> also_known) const {
  for (const auto& [key, value] : root_.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end() ||
        std::find(also_known.begin(), also_known.end(), key) != also_known.end())
      continue;
    std::string list;
    for (std::string_view k : known) list += cat(list.empty() ? "" : ", ", k);
    fail_key(key, cat("one of the known keys (", list, ")"), "an unknown key");
  }
}

const json& ConfigReader::required(const char* key, std::string_view expected) const {
  if (!has(key)) fail_key(key, expected, "nothing (the key is required)");
  return root_[key];
}

std::string ConfigReader::string(const char* key) const {
  const json& v = required(key, "a string");
  if (!v.is_string()) fail_key(key, "a string", describe_json(v));
  return v.get<std::string>();
}

size_t ConfigReader::choice(const char* key, std::initializer_list<std::string_view> options) const {
  std::string expected;
  for (std::string_view o : options) expected += cat(expected.empty() ? "" : " or ", "\"", o, "\"");
  const json& v = required(key, expected);
  size_t i = 0;
  for (std::string_view o : options) {
    if (v.is_string() && v.get_ref<const std::string&>() == o) return i;
    ++i;
  }
  fail_key(key, expected, describe_json(v));
}

int ConfigReader::integer(const char* key, int min, int max) const {
  return as_integer(key, required(key, "an integer"), min, max);
}

void ConfigReader::optional_integer(const char* key, int min, int max, int& out) const {
  if (has(key)) out = as_integer(key, root_[key], min, max);
}

void ConfigReader::optional_number(const char* key, bool positive, float& out) const {
  if (!has(key)) return;
  const json& v = root_[key];
  if (!v.is_number()) fail_key(key, "a number", describe_json(v));
  const double d = v.get<double>();
  if (!(std::fabs(d) <= FLT_MAX)) fail_key(key, "a number within float range", describe_json(v));
  if (positive && !(d > 0)) fail_key(key, "a positive number", describe_json(v));
  out = float(d);
}

void ConfigReader::optional_bool(const char* key, bool& out) const {
  if (!has(key)) return;
  const json& v = root_[key];
  if (!v.is_boolean()) fail_key(key, "true or false", describe_json(v));
  out = v.get<bool>();
}

std::vector<int> ConfigReader::integer_array(const char* key, size_t max_entries, int min, int max) const {
  const std::string expected = cat("an array of 1 to ", max_entries, " integers");
  const json& v = required(key, expected);
  if (!v.is_array() || v.empty() || v.size() > max_entries) fail_key(key, expected, describe_json(v));
  std::vector<int> out;
  for (const json& e : v) out.push_back(as_integer(key, e, min, max));
  return out;
}

std::vector<bool> ConfigReader::bool_array(const char* key) const {
  const json& v = required(key, "an array of true/false");
  if (!v.is_array()) fail_key(key, "an array of true/false", describe_json(v));
  std::vector<bool> out;
  for (const json& e : v) {
    if (!e.is_boolean()) fail_key(key, "an array of true/false", describe_json(v));
    out.push_back(e.get<bool>());
  }
  return out;
}

std::vector<std::string> ConfigReader::string_array(const char* key, size_t max_entries) const {
  const std::string expected = cat("an array of 1 to ", max_entries, " strings");
  const json& v = required(key, expected);
  if (!v.is_array() || v.empty() || v.size() > max_entries) fail_key(key, expected, describe_json(v));
  std::vector<std::string> out;
  for (const json& e : v) {
    if (!e.is_string()) fail_key(key, expected, describe_json(v));
    out.push_back(e.get<std::string>());
  }
  return out;
}

void ConfigReader::optional_string_array(const char* key, std::vector<std::string>& out) const {
  if (!has(key)) return;
  const json& v = root_[key];
  if (!v.is_array()) fail_key(key, "an array of strings", describe_json(v));
  out.clear();
  for (const json& e : v) {
    if (!e.is_string()) fail_key(key, "an array of strings", describe_json(v));
    out.push_back(e.get<std::string>());
  }
}

int ConfigReader::as_integer(const char* key, const json& v, int min, int max) const {
  if (!v.is_number_integer()) fail_key(key, "an integer", describe_json(v));
  // Compared in the type nlohmann holds: a value past int64_t is unsigned.
  const bool in_range = v.is_number_unsigned()
                            ? v.get<uint64_t>() >= uint64_t(std::max(min, 0)) && v.get<uint64_t>() <= uint64_t(max)
                            : v.get<int64_t>() >= min && v.get<int64_t>() <= max;
  if (!in_range) fail_key(key, cat("an integer in [", min, ", ", max, "]"), describe_json(v));
  return v.get<int>();
}

}  // namespace rtvd
