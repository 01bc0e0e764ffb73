// cast: fp32 sample -> activations, copied into each of `copies` images (the model input of a CFG batch).
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

struct CastParams {
  const float* x = nullptr;  // (count)
  void* y = nullptr;         // (copies, count)
  int64_t count = 0;
  int copies = 1;
};

void cast_cpu(const CastParams& p);

}  // namespace rtvd
