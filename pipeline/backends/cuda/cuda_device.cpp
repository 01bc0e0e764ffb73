// Which CUDA devices this build can use, and their start. Kernels are built for sm_80 and newer.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "base/error.h"
#include "pipeline/backends/gpu.h"
#if RTVD_HAS_CUDNN
#include <cudnn.h>
#endif

namespace rtvd {

std::vector<GpuInfo> cuda_devices(std::string* why_not) {
  std::vector<GpuInfo> out;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (why_not && driver == 0) *why_not = "no NVIDIA driver (no CUDA device)";
    else if (why_not) *why_not = cat("the NVIDIA driver supports CUDA ", driver / 1000, ".", driver % 1000 / 10,
                                " but this build needs ", runtime / 1000, ".", runtime % 1000 / 10, " (update the driver)");
    return out;
  }
  if (e != cudaSuccess || count == 0) {
    if (why_not) *why_not = e == cudaSuccess ? "no CUDA device" : cat("no usable CUDA device (", cudaGetErrorString(e), ")");
    return out;
  }
  std::string old;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    const int sm = p.major * 10 + p.minor;
    if (sm < 80) {
      old += cat(old.empty() ? "" : ", ", p.name, " (sm_", sm, ")");
      continue;
    }
    out.push_back({i, p.name, sm, p.totalGlobalMem});
  }
  if (out.empty() && why_not) *why_not = cat("GPU too old: ", old, "; rtvd's kernels need sm_80 (Ampere) or newer");
  return out;
}

// The handles go at once: what stays is the context and the libraries' loaded code, which every later
// handle shares.
void cuda_warm_up(int device) {
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) return;
  cublasLtHandle_t blas = nullptr;
  if (cublasLtCreate(&blas) == CUBLAS_STATUS_SUCCESS) cublasLtDestroy(blas);
#if RTVD_HAS_CUDNN
  cudnnHandle_t dnn = nullptr;
  if (cudnnCreate(&dnn) == CUDNN_STATUS_SUCCESS) cudnnDestroy(dnn);
#endif
}

}  // namespace rtvd
