// Pointer alignment, as the launchers check it before picking a vectorised path. Plain C++.
#pragma once
#include <cstddef>
#include <cstdint>

namespace rtvd {

// Whether p is a multiple of `bytes`; null counts as aligned (an absent operand constrains nothing).
inline bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned(p, 16); }

// bytes rounded up to a multiple of `to`: where the next region of a shared workspace may start (256: the
// boundary every library call and vector load is happy with).
inline size_t align_up(size_t bytes, size_t to = 256) { return (bytes + to - 1) / to * to; }

}  // namespace rtvd
