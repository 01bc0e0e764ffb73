// GPU time and memory for benchmarks (pipeline/device.h), and graph capture (cuda_graph.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/common/cuda_context.cuh"
#include "pipeline/backends/cuda/cuda_graph.h"
#include "pipeline/backends/gpu.h"

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

double cuda_median_ms(void* stream, int warmups, int runs, const std::function<void()>& f) {
  for (int i = 0; i < warmups; ++i) f();
  std::vector<double> ms = cuda_event_times_ms(stream, runs, f);
  std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
  return ms[runs / 2];
}

cudaGraph_t capture_stream(cudaStream_t stream, const std::function<void()>& queue) {
  cudaGraph_t graph = nullptr;
  RTVD_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    queue();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  RTVD_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  return graph;
}

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& queue) {
  const cudaGraph_t graph = capture_stream(stream, queue);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RTVD_CUDA_CHECK(instantiated);
  return exec;
}

size_t cuda_memory_used(int device) {
  RTVD_CUDA_CHECK(cudaSetDevice(device));
  size_t free_bytes = 0, total = 0;
  RTVD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

}  // namespace rtvd
