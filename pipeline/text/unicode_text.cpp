#include "pipeline/text/unicode_text.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <cstdio>

#include "base/error.h"

namespace rtvd {

namespace {

[[noreturn]] void fail_utf8(std::string_view where, size_t at, unsigned char byte) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", byte);
  fail(where, ": not valid UTF-8 at byte ", at, " (", hex, ")");
}

void check_icu(UErrorCode err, const char* what) {
  if (U_FAILURE(err)) fail("ICU ", what, ": ", u_errorName(err));
}

std::u16string to_utf16(std::u32string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (const char32_t c : s) {
    if (c > 0xFFFF) {
      out += char16_t(U16_LEAD(c));
      out += char16_t(U16_TRAIL(c));
    } else {
      out += char16_t(c);
    }
  }
  return out;
}

std::u32string from_utf16(const char16_t* s, int32_t n) {
  std::u32string out;
  out.reserve(size_t(n));
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U16_NEXT(s, i, n, c);
    out += char32_t(c);
  }
  return out;
}

}  // namespace

std::u32string decode_utf8(std::string_view s, std::string_view where) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) {
      out += char32_t(lead);
      ++i;
      continue;
    }
    size_t length;
    char32_t c, min;
    if ((lead & 0xE0) == 0xC0) {
      length = 2, c = lead & 0x1F, min = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, c = lead & 0x0F, min = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, c = lead & 0x07, min = 0x10000;
    } else {
      fail_utf8(where, i, lead);
    }
    for (size_t k = 1; k < length; ++k) {
      if (i + k >= s.size()) fail_utf8(where, i, lead);
      const auto next = static_cast<unsigned char>(s[i + k]);
      if ((next & 0xC0) != 0x80) fail_utf8(where, i + k, next);
      c = (c << 6) | (next & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and values past Unicode's range are not characters.
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) fail_utf8(where, i, lead);
    out += c;
    i += length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t c : s) append_utf8(out, c);
  return out;
}

std::u32string nfc(std::u32string_view s) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* normalizer = unorm2_getNFCInstance(&err);
  check_icu(err, "NFC instance");
  const std::u16string in = to_utf16(s);
  const auto n = int32_t(in.size());
  // Most text is already NFC: the quick check says so without building a copy.
  if (unorm2_spanQuickCheckYes(normalizer, in.data(), n, &err) == n && U_SUCCESS(err)) return std::u32string(s);
  err = U_ZERO_ERROR;
  std::u16string out(in.size() + 16, u'\0');
  int32_t length = unorm2_normalize(normalizer, in.data(), n, out.data(), int32_t(out.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {  // composition rarely grows text; when it does, ICU gives the size
    err = U_ZERO_ERROR;
    out.resize(size_t(length));
    length = unorm2_normalize(normalizer, in.data(), n, out.data(), int32_t(out.size()), &err);
  }
  check_icu(err, "NFC normalization");
  return from_utf16(out.data(), length);
}

std::u32string to_lower(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (const char32_t c : s) {
    if (c < 0x80) {
      out += (c >= U'A' && c <= U'Z') ? c + 32 : c;
      continue;
    }
    // One code point at a time, so ICU sees no context (no final sigma), as Rust's char::to_lowercase.
    UChar in[2];
    int32_t n = 0;
    U16_APPEND_UNSAFE(in, n, UChar32(c));
    UChar lower[8];  // full mappings are at most 3 code points
    UErrorCode err = U_ZERO_ERROR;
    const int32_t m = u_strToLower(lower, 8, in, n, "", &err);
    check_icu(err, "lowercase");
    out += from_utf16(lower, m);
  }
  return out;
}

bool is_letter(char32_t c) { return (U_GET_GC_MASK(UChar32(c)) & U_GC_L_MASK) != 0; }
bool is_number(char32_t c) { return (U_GET_GC_MASK(UChar32(c)) & U_GC_N_MASK) != 0; }
bool is_white_space(char32_t c) { return u_isUWhiteSpace(UChar32(c)); }

}  // namespace rtvd
