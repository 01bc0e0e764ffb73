// rtvd bench kernels: each custom kernel and its cuDNN/cuBLAS alternative at the production shapes of
// the design (SD 2.1/1.5 U-Net, batch 2, 64x64 latents) and the default model's, against ceilings
// measured in the same run. CUDA events, warm-up, median of many runs, inputs rotated past L2.
#pragma once
#include <nlohmann/json.hpp>

#include "pipeline/device.h"

namespace rtvd {

// Prints a table as it goes and returns every measurement.
nlohmann::json bench_kernels(const GpuInfo& gpu, int runs);

}  // namespace rtvd
