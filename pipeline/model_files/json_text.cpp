#include "pipeline/model_files/json_text.h"

#include <functional>

#include "kernels/common/error.h"
#include "kernels/common/quoted_text.h"

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
  if (const size_t at = json_too_deep_at(text, kMaxJsonDepth); at != std::string_view::npos)
    fail(where, ": JSON nested deeper than ", kMaxJsonDepth, " levels (at byte ", at, ")");
  json::parser_callback_t callback = nullptr;
  if (duplicates) callback = std::ref(*duplicates);
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    fail(where, ": not valid JSON: ", reason(e.what()));
  }
}

std::string json_excerpt(const json& v, size_t max_chars) {
  std::string out;
  append_excerpt(v, out, max_chars);
  // Strings end by max_chars: what lies past it is ASCII (quotes, brackets, "...", numbers), cut anywhere.
  return out.size() <= max_chars ? out : out.substr(0, max_chars) + "...";
}

}  // namespace rtvd
