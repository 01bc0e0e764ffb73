// Dotted parameter names ("down_blocks.0.resnets.1.conv1.weight"): their parts, and the block indices in them.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rtvd {

inline std::vector<std::string_view> split_name(std::string_view name) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

inline std::string join_name(std::span<const std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) {
    if (!s.empty()) s += '.';
    s += p;
  }
  return s;
}

// A block index: 1 to 4 decimal digits, no sign, no leading zero; -1 for anything else (a module name).
inline int name_index(std::string_view part) {
  if (part.empty() || part.size() > 4 || (part.size() > 1 && part[0] == '0')) return -1;
  int v = 0;
  for (char c : part) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace rtvd
