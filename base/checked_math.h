// Sizes that come from outside (file headers, configs, flags) multiplied and summed in 64 bits with every
// step checked: an overflow is an Error naming what was being sized, never a wrapped or negative count that
// a later allocation or loop would trust.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "base/error.h"

namespace rtvd {

// a * b and a + b; Error "<what>: size overflows 64 bits (a x b)" when the result does not fit in int64_t,
// so that it stays usable as an element count, a byte count or an offset of either signedness.
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (a < 0 || b < 0) fail(what, ": negative size (", a, " x ", b, ")");
  if (__builtin_mul_overflow(a, b, &r)) fail(what, ": size overflows 64 bits (", a, " x ", b, ")");
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (a < 0 || b < 0) fail(what, ": negative size (", a, " + ", b, ")");
  if (__builtin_add_overflow(a, b, &r)) fail(what, ": size overflows 64 bits (", a, " + ", b, ")");
  return r;
}

// unit x the product of dims (e.g. bytes per element x a shape), every partial product checked, so the
// order of the dims cannot hide an overflow behind a later 0.
inline int64_t checked_numel(std::span<const int64_t> dims, std::string_view what, int64_t unit = 1) {
  int64_t n = unit;
  for (int64_t d : dims) n = checked_mul(n, d, what);
  return n;
}

}  // namespace rtvd
