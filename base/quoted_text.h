// Text that rtvd did not write (tensor names, LoRA keys, metadata, config values, tokenizer lines, names
// inside JSON, PNG chunk types) reaches a message only through here: escaped, so that it cannot move the
// cursor, recolour or retitle the terminal, end the line or cut the message at a NUL, and excerpted, so that a
// 10 MB value costs a message no more than a short one. Beside error.h, because every layer that reads a
// file builds messages from what it read.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/error.h"

namespace rtvd {

// Bytes of escaped text a message quotes of one string: every name a real checkpoint uses (at most ~100
// characters) is whole, and a message quoting one stays around 300 bytes.
constexpr size_t kExcerptBytes = 160;

namespace quoted_text_detail {

// The length of the well-formed UTF-8 sequence at s[i] (1 to 4), or 0 where s[i] does not begin one
// (a stray continuation byte, an overlong form, a surrogate, a code point above U+10FFFF, a cut sequence).
inline size_t utf8_length(std::string_view s, size_t i, uint32_t& code_point) {
  const auto byte = [&](size_t k) { return k < s.size() ? static_cast<uint8_t>(s[k]) : uint8_t(0); };
  const uint8_t b = byte(i);
  if (b < 0x80) return code_point = b, 1;
  size_t n = 0;
  uint8_t low = 0x80, high = 0xbf;  // the range of the second byte
  if (b >= 0xc2 && b <= 0xdf) n = 2, code_point = b & 0x1f;
  else if (b >= 0xe0 && b <= 0xef) n = 3, code_point = b & 0x0f, low = b == 0xe0 ? 0xa0 : 0x80, high = b == 0xed ? 0x9f : 0xbf;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, code_point = b & 0x07, low = b == 0xf0 ? 0x90 : 0x80, high = b == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  for (size_t k = 1; k < n; ++k) {
    const uint8_t c = byte(i + k);
    if (c < (k == 1 ? low : 0x80) || c > (k == 1 ? high : 0xbf)) return 0;
    code_point = code_point << 6 | (c & 0x3f);
  }
  return n;
}

// Code points a terminal acts on or that change how the rest of the line reads: C0, DEL and C1 controls (0x9b
// is CSI), the line and paragraph separators, and the bidirectional marks and overrides ("Trojan Source").
inline bool is_control(uint32_t c) {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x061c || c == 0x200e || c == 0x200f ||
         (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

// The escape of the character at s[i] (advancing i past it), or the character itself.
inline std::string next_printable(std::string_view s, size_t& i) {
  uint32_t c = 0;
  const size_t n = utf8_length(s, i, c);
  char escape[12];
  if (n == 0) {
    std::snprintf(escape, sizeof escape, "\\x%02x", unsigned(static_cast<uint8_t>(s[i++])));
    return escape;
  }
  i += n;
  if (c == '"' || c == '\\') return {'\\', char(c)};
  if (c == '\n') return "\\n";
  if (c == '\t') return "\\t";
  if (c == '\r') return "\\r";
  if (is_control(c)) {
    std::snprintf(escape, sizeof escape, "\\u%04x", unsigned(c));
    return escape;
  }
  return std::string(s.substr(i - n, n));
}

}  // namespace quoted_text_detail

// The escaped form of text's longest prefix whose escaped form fits max_bytes, never a part of a character
// or of an escape; `taken` gets how many bytes of text it covers. Escapes are JSON's (\" \\ \n \t \r \u00XX),
// and \xNN for each byte that is not well-formed UTF-8. What it returns is printable UTF-8 on one line.
inline std::string escaped_prefix(std::string_view text, size_t max_bytes, size_t& taken) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t next = i;
    const std::string piece = quoted_text_detail::next_printable(text, next);
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i = next;
  }
  taken = i;
  return out;
}

// text escaped (escaped_prefix), and when it does not fit max_bytes, its first max_bytes followed by
// "... (N bytes)": the length of the whole, which says it was cut.
inline std::string printable(std::string_view text, size_t max_bytes = kExcerptBytes) {
  size_t taken = 0;
  std::string out = escaped_prefix(text, max_bytes, taken);
  return taken == text.size() ? out : cat(out, "... (", text.size(), " bytes)");
}

// printable(text) between single quotes, the cut marker after them: 'name', 'aaaa'... (10485760 bytes).
// (Not named quoted: for a std::string argument, lookup would find std::quoted and prefer it.)
inline std::string quote(std::string_view text, size_t max_bytes = kExcerptBytes) {
  size_t taken = 0;
  const std::string out = escaped_prefix(text, max_bytes, taken);
  return taken == text.size() ? cat("'", out, "'") : cat("'", out, "'... (", text.size(), " bytes)");
}

}  // namespace rtvd
