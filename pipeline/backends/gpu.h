// What the CUDA side offers plain C++ callers (the engine, the bench commands): the usable GPUs, GPU event
// timing and memory use. In a build without CUDA, cuda_devices() says so and the rest throw.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace rtvd {

struct GpuInfo {
  int index;
  std::string name;
  int sm;  // 90 for sm_90
  size_t memory_bytes;
};

// Usable CUDA devices; why_not says why there are none (no CUDA build, no device, old driver or GPU).
std::vector<GpuInfo> cuda_devices(std::string* why_not);
// Makes the device's CUDA context and loads what cuBLASLt's and cuDNN's first handles load (~0.3-0.4 s),
// so that a backend made next, on any thread, finds them ready. Errors are left to that backend to meet.
void cuda_warm_up(int device);

// For benchmarks. GPU milliseconds of each of `runs` calls of f, from events recorded on `stream` (the
// backend's cudaStream_t) around each call; the calls are queued back to back, as frames are.
std::vector<double> cuda_event_times_ms(void* stream, int runs, const std::function<void()>& f);
// The median of cuda_event_times_ms(stream, runs, f) after `warmups` untimed calls.
double cuda_median_ms(void* stream, int warmups, int runs, const std::function<void()>& f);
// Bytes of memory in use on the GPU, by every process (this one's CUDA context included).
size_t cuda_memory_used(int device);

}  // namespace rtvd
