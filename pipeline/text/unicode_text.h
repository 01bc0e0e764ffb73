// UTF-8 and the few Unicode operations a tokenizer needs, on ICU's tables (ICU 72: Unicode 15.0). Text is
// handled as code points (std::u32string) between decode and encode.
#pragma once
#include <string>
#include <string_view>

namespace rtvd {

// s's code points. Invalid UTF-8 (a stray continuation byte, a truncated or overlong sequence, a surrogate,
// past U+10FFFF) throws rtvd::Error: "<where>: not valid UTF-8 at byte N (0xXX)".
std::u32string decode_utf8(std::string_view s, std::string_view where);
void append_utf8(std::string& out, char32_t c);
std::string encode_utf8(std::u32string_view s);

// Unicode Normalization Form C.
std::u32string nfc(std::u32string_view s);

// Each code point's full lowercase mapping on its own (root locale, no context): U+0130 'İ' becomes
// "i\u0307", and 'Σ' is always 'σ', never the final 'ς'. This is Rust's char::to_lowercase applied to every
// character, which tokenizers' Lowercase normalizer does.
std::u32string to_lower(std::u32string_view s);

bool is_letter(char32_t c);       // general category L* (regex \p{L})
bool is_number(char32_t c);       // general category N* (regex \p{N})
bool is_white_space(char32_t c);  // the White_Space property (regex \s in Unicode mode)

}  // namespace rtvd
