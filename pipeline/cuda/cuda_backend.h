// The CUDA backend: fp16 activations and matrices, fp32 per-channel vectors; the frame's ops captured
// once as a CUDA graph and replayed every frame.
#pragma once
#include <memory>
#include <string>

#include "pipeline/backend.h"
#include "pipeline/device.h"

namespace rtvd {

// kernels: "auto" | "custom" | "cudnn" (convolutions through cuDNN instead of the custom implicit GEMM).
std::unique_ptr<Backend> make_cuda_backend(const GpuInfo& gpu, const std::string& kernels);

}  // namespace rtvd
