#include "pipeline/model_files/json_text.h"

#include <cstdio>
#include <functional>

#include "kernels/common/error.h"

namespace rtvd {

namespace {

using nlohmann::json;

// nlohmann's message quotes the last token read, raw file bytes of any length: printable ASCII only, cut short.
std::string reason(std::string_view what) {
  constexpr size_t kMax = 200;
  std::string s;
  for (size_t i = 0; i < what.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(what[i]);
    s += c < 0x20 ? ' ' : c >= 0x7f ? '?' : char(c);
  }
  return what.size() > kMax ? s + "..." : s;
}

// Appends v to out until out holds `limit` characters. Each nested call appends a bracket before it
// recurses, so the recursion is at most `limit` deep whatever the value.
void append_excerpt(const json& v, std::string& out, size_t limit) {
  if (out.size() >= limit) return;
  if (v.is_string()) {
    out += '"' + json_escaped(v.get_ref<const std::string&>(), limit - out.size()) + '"';
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
      out += '"' + json_escaped(key, limit - out.size()) + "\":";
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
  if (out.size() <= max_chars) return out;
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;  // not inside a character
  return out.substr(0, cut) + "...";
}

std::string json_escaped(std::string_view s, size_t max_chars) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max_chars; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n' || c == '\t' || c == '\r') {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += char(c);
    }
  }
  if (i == s.size()) return out;
  // Cut at a character: drop the bytes already taken of a UTF-8 sequence that continues at s[i].
  const auto continuation = [&](size_t k) { return (static_cast<unsigned char>(s[k]) & 0xc0) == 0x80; };
  if (continuation(i)) {
    while (i > 0 && continuation(i - 1)) --i, out.pop_back();
    if (i > 0) --i, out.pop_back();  // the sequence's lead byte
  }
  return out + "...";
}

}  // namespace rtvd
