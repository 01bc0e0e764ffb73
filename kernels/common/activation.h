// Shared by every op: the activation enum and host/device qualifiers.
// Plain C++: the CPU build includes this without the CUDA toolkit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cmath>

#if defined(__CUDACC__)
#define RTVD_HD __host__ __device__ __forceinline__
#else
#define RTVD_HD inline
#endif

namespace rtvd {

// Element type of activations and weight matrices: fp32 on the CPU backend, fp16 on CUDA.
// Small per-channel vectors (biases, norm affine, folded BatchNorm, FiLM) are always fp32.
enum class Activation : int { None = 0, Silu = 1 };

RTVD_HD float silu(float x) { return x / (1.0f + expf(-x)); }
RTVD_HD float apply_activation(float x, Activation a) { return a == Activation::Silu ? silu(x) : x; }

}  // namespace rtvd
