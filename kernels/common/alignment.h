// Pointer alignment, as the launchers check it before picking a vectorised path. Plain C++.
#pragma once
#include <cstdint>

namespace rtvd {

// Whether p is a multiple of `bytes`; null counts as aligned (an absent operand constrains nothing).
inline bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned(p, 16); }

}  // namespace rtvd
