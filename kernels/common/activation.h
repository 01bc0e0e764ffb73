// Shared by every op: the activation enum and host/device qualifiers.
// Plain C++: the CPU build includes this without the CUDA toolkit.
// Element type of activations and weight matrices: fp32 on the CPU backend, fp16 on CUDA.
// Small per-channel vectors (biases, norm affine, folded BatchNorm, FiLM) are always fp32.
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

// The activation an op applies. linear and scale_activation take every one; conv2d takes None, SiLU and
// ReLU (TAESD); group_norm None and SiLU.
enum class Activation : int {
  None = 0,
  Silu = 1,       // x sigmoid(x)
  Gelu = 2,       // exact: 0.5 x (1 + erf(x / sqrt 2)), PyTorch's F.gelu, transformers' "gelu" (OpenCLIP)
  QuickGelu = 3,  // x sigmoid(1.702 x), transformers' "quick_gelu" (OpenAI CLIP)
  Relu = 4,       // max(x, 0): TAESD's blocks
  Tanh = 5,       // TAESD's decoder clamps its input with 3 tanh(x / 3)
};

// For shape keys and messages: "none", "silu", "gelu", "quick_gelu", "relu", "tanh".
inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::Silu: return "silu";
    case Activation::Gelu: return "gelu";
    case Activation::QuickGelu: return "quick_gelu";
    case Activation::Relu: return "relu";
    case Activation::Tanh: return "tanh";
  }
  return "unknown";
}

RTVD_HD float silu(float x) { return x / (1.0f + expf(-x)); }
// 1 + erf(z) written erfc(-z): full relative precision for negative x, where 1 + erf(z) cancels.
RTVD_HD float gelu(float x) { return 0.5f * x * erfcf(-x * 0.70710678118654752f); }
RTVD_HD float quick_gelu(float x) { return x / (1.0f + expf(-1.702f * x)); }
RTVD_HD float relu(float x) { return x > 0.0f ? x : 0.0f; }

RTVD_HD float apply_activation(float x, Activation a) {
  switch (a) {
    case Activation::Silu: return silu(x);
    case Activation::Gelu: return gelu(x);
    case Activation::QuickGelu: return quick_gelu(x);
    case Activation::Relu: return relu(x);
    case Activation::Tanh: return tanhf(x);
    default: return x;
  }
}

}  // namespace rtvd
