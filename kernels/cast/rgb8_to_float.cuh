// rgb8_to_float on the GPU, bit for bit the CPU's (IEEE division and subtraction, never contracted).
#pragma once
#include <cuda_runtime.h>

#include "kernels/cast/rgb8_to_float.h"

namespace rtvd {

void rgb8_to_float(const Rgb8ToFloatParams& p, cudaStream_t stream);

}  // namespace rtvd
