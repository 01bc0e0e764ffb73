// The one CUDA host module: a device's context for the launchers (stream, cuBLASLt and cuDNN handles, the
// library plan cache, the grid-sync word and a workspace that grows on demand), the ceilings of that device,
// and, through the headers it includes, the check macros (RTVD_CUDA_CHECK, RTVD_CUBLAS_CHECK) and the
// move-only device and pinned memory (cuda_memory.h). The backend, the tests, the kernel benchmark and the
// GUI's interop all build on it.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/common/cuda_context.cuh"
#include "kernels/common/plan_cache.h"
#include "pipeline/backends/cuda/cuda_memory.h"
#include "pipeline/backends/profiler.h"

namespace rtvd {

class CudaHost {
 public:
  // Makes device `index` current and creates a non-blocking stream, the library handles and a workspace of
  // initial_workspace bytes (cuBLASLt's and cuDNN's scratch, 32 MiB by default).
  explicit CudaHost(int index = 0, size_t initial_workspace = kLibraryWorkspace);
  ~CudaHost();
  CudaHost(const CudaHost&) = delete;
  CudaHost& operator=(const CudaHost&) = delete;

  static constexpr size_t kLibraryWorkspace = size_t(32) << 20;

  const CudaContext& ctx() const { return ctx_; }
  cudaStream_t stream() const { return ctx_.stream; }
  int index() const { return index_; }
  const std::string& name() const { return name_; }

  // The context with a workspace of at least `bytes`, grown (after the stream's queued work, which may use
  // the old one) when short. Allocates: at load and in tests, never inside a frame or a capture.
  const CudaContext& with_workspace(size_t bytes);
  // Exactly `bytes` of workspace (after the stream's queued work): gives back what tuning grew.
  void resize_workspace(size_t bytes);

  // Names the GPU, driver and library versions: a tuning cache entry made under another key is not used.
  std::string device_key() const;

  // fp16 GEMM through cuBLASLt at 8192^3 and a 1 GiB device-to-device copy, measured now (allocates).
  Ceilings measure_ceilings();

 private:
  int index_ = 0;
  std::string name_;
  CudaContext ctx_;
  DeviceMemory workspace_, grid_sync_;
  PlanCache plans_;
};

// Memory filled with fp16 values spread over [-1, 1] from a fixed seed: inputs for timing (zeros run faster
// than real data).
void fill_random_half(const DeviceMemory& m, cudaStream_t stream);

}  // namespace rtvd
