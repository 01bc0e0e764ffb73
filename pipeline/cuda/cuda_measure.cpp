// GPU time and memory for benchmarks (pipeline/device.h).
#include <cuda_runtime.h>

#include "kernels/cuda_context.cuh"
#include "pipeline/device.h"

namespace rtvd {

std::vector<double> cuda_event_times_ms(void* stream, int runs, const std::function<void()>& f) {
  const auto s = static_cast<cudaStream_t>(stream);
  std::vector<cudaEvent_t> events(2 * size_t(runs));
  for (cudaEvent_t& e : events) RTVD_CUDA_CHECK(cudaEventCreate(&e));
  try {
    for (int i = 0; i < runs; ++i) {
      RTVD_CUDA_CHECK(cudaEventRecord(events[2 * i], s));
      f();
      RTVD_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], s));
    }
    RTVD_CUDA_CHECK(cudaEventSynchronize(events.back()));
    std::vector<double> ms(runs);
    for (int i = 0; i < runs; ++i) {
      float m = 0;
      RTVD_CUDA_CHECK(cudaEventElapsedTime(&m, events[2 * i], events[2 * i + 1]));
      ms[i] = m;
    }
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    return ms;
  } catch (...) {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    throw;
  }
}

size_t cuda_memory_used(int device) {
  RTVD_CUDA_CHECK(cudaSetDevice(device));
  size_t free_bytes = 0, total = 0;
  RTVD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

}  // namespace rtvd
