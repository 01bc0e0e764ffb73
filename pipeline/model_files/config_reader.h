// The config files rtvd reads (its own config.json, diffusers' and transformers' component configs) go
// through here: size-bounded reading, one parse, and typed, range-checked keys whose every failure is one
// line, "<label>: key 'k': expected ..., got ...".
#pragma once
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rtvd {

constexpr size_t kMaxConfigBytes = size_t(4) << 20;  // of any config file

// The file's text; Error naming the path when it is not a regular file (input_file.h), cannot be read or is
// larger than kMaxConfigBytes.
std::string read_config_file(const std::string& path);
// text as a JSON object without repeated keys; Error naming label otherwise.
nlohmann::json parse_config_object(std::string_view text, const std::string& label);

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& root, const std::string& label) : root_(root), label_(label) {}

  // "<label>: key 'k': expected ..., got ...", the key quoted (quoted_text.h): it may be the file's.
  [[noreturn]] void fail_key(std::string_view key, std::string_view expected, std::string_view got) const;
  // Every key must be one of known (or of also_known: keys that are read elsewhere or do not matter).
  void reject_unknown_keys(std::span<const std::string_view> known,
                           std::span<const std::string_view> also_known = {}) const;

  bool has(const char* key) const { return root_.contains(key); }
  bool is_null(const char* key) const { return !has(key) || root_[key].is_null(); }
  const std::string& label() const { return label_; }
  const nlohmann::json& required(const char* key, std::string_view expected) const;

  std::string string(const char* key) const;
  // One of the given spellings, returned as its index.
  size_t choice(const char* key, std::initializer_list<std::string_view> options) const;
  int integer(const char* key, int min, int max) const;
  void optional_integer(const char* key, int min, int max, int& out) const;
  void optional_number(const char* key, bool positive, float& out) const;
  void optional_bool(const char* key, bool& out) const;
  std::vector<int> integer_array(const char* key, size_t max_entries, int min, int max) const;
  std::vector<bool> bool_array(const char* key) const;
  std::vector<std::string> string_array(const char* key, size_t max_entries) const;
  void optional_string_array(const char* key, std::vector<std::string>& out) const;
  // A value as an integer in [min, max] (min is 1 for sizes, 0 where 0 means "none"), key naming it.
  int as_integer(const char* key, const nlohmann::json& v, int min, int max) const;

 private:
  const nlohmann::json& root_;
  const std::string& label_;
};

// A JSON value for an error message: its type and a short one-line excerpt ("string \"v\"", "array [1,2]"),
// or "null".
std::string describe_json(const nlohmann::json& v);

}  // namespace rtvd
