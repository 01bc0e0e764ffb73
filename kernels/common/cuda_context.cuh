// What every CUDA launcher gets besides its params: the stream, library handles and a scratch buffer
// owned by the backend. Launchers never allocate and never synchronise.
#pragma once
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "base/error.h"

struct cudnnContext;  // cudnnHandle_t, without cudnn.h for those who don't call cuDNN

namespace rtvd {

class PlanCache;  // kernels/common/plan_cache.h

struct CudaContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  void* workspace = nullptr;  // shared scratch (cuBLASLt workspace), owned by the backend
  size_t workspace_bytes = 0;
  unsigned* grid_sync = nullptr;  // a device word, zeroed once: kernels that wait for their whole grid count arrivals there
  int sm_count = 0;
  int sm_version = 0;  // 80, 86, 89, 90, ...
  // Other streams' kernels may run beside this stream's (a branch of the frame's graph): no kernel may wait for
  // its whole grid to be resident (group_norm's single launch does).
  bool shares_gpu = false;
  cudnnContext* cudnn = nullptr;  // cuDNN's handle, null without cuDNN: its candidates then can't run
  PlanCache* plans = nullptr;     // where library candidates keep their per-shape plans; null: none can
};

// Checked where it happens: the statement, file and line go into the message.
inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) fail(what, " failed at ", file, ":", line, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}
inline void cublas_check(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(what, " failed at ", file, ":", line, ": cuBLAS status ", int(s));
}

}  // namespace rtvd

#define RTVD_CUDA_CHECK(call) ::rtvd::cuda_check((call), #call, __FILE__, __LINE__)
#define RTVD_CUBLAS_CHECK(call) ::rtvd::cublas_check((call), #call, __FILE__, __LINE__)
// After every launch: a bad configuration surfaces here, named by the op.
#define RTVD_CHECK_LAUNCH(op) ::rtvd::cuda_check(cudaGetLastError(), "launch of " op, __FILE__, __LINE__)
