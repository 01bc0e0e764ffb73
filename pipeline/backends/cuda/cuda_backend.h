// The CUDA backend: fp16 activations and matrices, fp32 per-channel vectors; the frame's ops captured
// once as a CUDA graph and replayed every frame.
#pragma once
#include <memory>
#include <string>

#include "pipeline/backends/backend.h"
#include "kernels/common/kernel_family.h"
#include "pipeline/backends/gpu.h"

namespace rtvd {

std::unique_ptr<Backend> make_cuda_backend(const GpuInfo& gpu, KernelFamily kernels);

}  // namespace rtvd
