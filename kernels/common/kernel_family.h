// --kernels: which implementations the heavy ops (conv2d, attention) may choose from. Parsed once, from the
// flag, and passed down as this enum: it filters each op's candidates (kernels/<op>/<op>_candidates.cuh).
// Plain C++: the CPU build and the command line include it without the CUDA toolkit.
#pragma once
#include <string>
#include <vector>

#include "base/error.h"

namespace rtvd {

enum class KernelFamily {
  Auto,    // every candidate; each layer times them and keeps the fastest (cached on disk)
  Custom,  // rtvd's own kernels only, each op's default
  Cudnn,   // cuDNN where it has the op (conv2d, attention), else rtvd's
};

inline const char* kernel_family_name(KernelFamily k) {
  switch (k) {
    case KernelFamily::Auto: return "auto";
    case KernelFamily::Custom: return "custom";
    case KernelFamily::Cudnn: return "cudnn";
  }
  return "?";
}

// The values --kernels takes, in the order help and errors list them.
inline std::vector<std::string> kernel_family_names() {
  return {kernel_family_name(KernelFamily::Auto), kernel_family_name(KernelFamily::Custom),
          kernel_family_name(KernelFamily::Cudnn)};
}

// The family a --kernels value names; throws rtvd::Error naming the flag for any other.
inline KernelFamily kernel_family_named(const std::string& name) {
  for (KernelFamily k : {KernelFamily::Auto, KernelFamily::Custom, KernelFamily::Cudnn})
    if (name == kernel_family_name(k)) return k;
  fail("--kernels ", name, ": expected auto, custom or cudnn");
}

}  // namespace rtvd
