#include "pipeline/model_files/json_text.h"

#include <vector>

#include "base/error.h"
#include "base/quoted_text.h"

namespace rtvd {

namespace {

using nlohmann::json;

// nlohmann's message quotes the last token read, raw file bytes of any length.
std::string reason(std::string_view what) { return printable(what, 200); }

// s between double quotes, escaped, its escaped text ending at out's `limit` at the latest ("..." where cut).
void append_string(std::string_view s, std::string& out, size_t limit) {
  out += '"';
  size_t taken = 0;
  out += escaped_prefix(s, limit > out.size() ? limit - out.size() : 0, taken);
  out += taken == s.size() ? "\"" : "...";
}

// Appends v to out until out holds `limit` characters. Each nested call appends a bracket before it
// recurses, so the recursion is at most `limit` deep whatever the value.
void append_excerpt(const json& v, std::string& out, size_t limit) {
  if (out.size() >= limit) return;
  if (v.is_string()) {
    append_string(v.get_ref<const std::string&>(), out, limit);
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const json& e : v) {
      if (out.size() >= limit) return;
      if (!first) out += ',';
      first = false;
      append_excerpt(e, out, limit);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, e] : v.items()) {
      if (out.size() >= limit) return;
      if (!first) out += ',';
      first = false;
      append_string(key, out, limit);
      out += ':';
      append_excerpt(e, out, limit);
    }
    out += '}';
  } else {
    out += v.dump();  // a number, true, false or null: short
  }
}

// nlohmann's SAX events to a value, as its own parser builds one, counting the values and noting the first
// repeated key. Each key goes into its object when it is read, so a repeat is found there in O(log n):
// nlohmann's callback parser, which could see repeats too, scans the whole parent object at the end of each
// object (quadratic in a safetensors header's tensors: hours for a million). The nesting, and so open_, is
// bounded before (json_too_deep_at).
class ValueBuilder {
 public:
  ValueBuilder(std::string_view where, DuplicateKeyFinder* duplicates) : where_(where), duplicates_(duplicates) {}

  json take() { return std::move(root_); }

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(json::number_integer_t v) { return add(v); }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t v, const std::string& /*text*/) { return add(v); }
  bool string(std::string& v) { return add(std::move(v)); }
  bool binary(json::binary_t& v) { return add(std::move(v)); }  // never in JSON text

  bool start_object(size_t /*size, unknown*/) { return open(json::object()); }
  bool start_array(size_t /*size, unknown*/) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    auto [member, fresh] = open_.back()->get_ref<json::object_t&>().try_emplace(std::move(k));
    const std::string& name = member->first;
    if (open_.size() == 1) top_level_key_ = name;
    if (!fresh && duplicates_ && !duplicates_->found) {
      duplicates_->found = true;
      duplicates_->duplicate = name;
      if (open_.size() > 1) duplicates_->duplicate_in = top_level_key_;
    }
    member_ = &member->second;  // a repeated key's value replaces the earlier one, as nlohmann's parser does
    return true;
  }

  template <class Exception>
  bool parse_error(size_t /*byte*/, const std::string& /*token*/, const Exception& e) {
    throw e;
  }

 private:
  // Puts v where the text has it: the root, the next element of the open array, or the open object's member
  // whose key was just read.
  json* place(json&& v) {
    if (++values_ > kMaxJsonValues)
      fail(where_, ": more than ", kMaxJsonValues, " JSON values, expected at most ", kMaxJsonValues,
           " (a model file's JSON holds up to about 200000)");
    if (open_.empty()) return &(root_ = std::move(v));
    if (open_.back()->is_array()) {
      json::array_t& elements = open_.back()->get_ref<json::array_t&>();
      elements.push_back(std::move(v));
      return &elements.back();
    }
    return &(*member_ = std::move(v));
  }
  bool add(json&& v) {
    place(std::move(v));
    return true;
  }
  // An open array or object stays the last element of its parent until it closes, so its address holds.
  bool open(json&& container) {
    open_.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  std::string_view where_;
  DuplicateKeyFinder* duplicates_;
  json root_;
  std::vector<json*> open_;    // the arrays and objects being read, outermost first
  json* member_ = nullptr;     // the open object's member whose key was read last
  std::string top_level_key_;  // the top-level member being read
  size_t values_ = 0;
};

}  // namespace

// Only the depth of text nlohmann accepts matters: for valid JSON this scan sees strings exactly as the
// parser does, and invalid JSON is refused by the parser anyway.
size_t json_too_deep_at(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

json parse_json(std::string_view text, std::string_view where, DuplicateKeyFinder* duplicates) {
  if (const size_t at = text.find('\0'); at != std::string_view::npos)
    fail(where, ": not valid JSON: a NUL byte at byte ", at);
  if (const size_t at = json_too_deep_at(text, kMaxJsonDepth); at != std::string_view::npos)
    fail(where, ": JSON nested deeper than ", kMaxJsonDepth, " levels (at byte ", at, ")");
  ValueBuilder builder(where, duplicates);
  try {
    json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::exception& e) {
    fail(where, ": not valid JSON: ", reason(e.what()));
  }
  return builder.take();
}

std::string json_excerpt(const json& v, size_t max_chars) {
  std::string out;
  append_excerpt(v, out, max_chars);
  // Strings end by max_chars: what lies past it is ASCII (quotes, brackets, "...", numbers), cut anywhere.
  return out.size() <= max_chars ? out : out.substr(0, max_chars) + "...";
}

}  // namespace rtvd
