// rtvd bench kernels: every op of the graph at the production cases of its table (kernels/<op>/*_cases.h:
// the SD 2.1/1.5 U-Net at batch 2 and the default model), conv2d, attention and linear by candidate with the
// default first, against ceilings measured in the same run. CUDA events, warm-up, median of many runs,
// inputs rotated past L2.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "pipeline/backends/gpu.h"

namespace rtvd {

// Prints a table as it goes and returns every measurement.
// only: one op's rows ("linear"), or empty for every op's.
nlohmann::json bench_kernels(const GpuInfo& gpu, int runs, const std::string& only);

}  // namespace rtvd
