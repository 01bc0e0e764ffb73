// gpu.h in a build without CUDA: no devices, and timing or memory queries are errors.
#include "build_config.h"
#include "pipeline/backends/gpu.h"
#include "base/error.h"

namespace rtvd {

#if !RTVD_HAS_CUDA
std::vector<GpuInfo> cuda_devices(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA backend: " RTVD_NO_CUDA_REASON;
  return {};
}

std::vector<double> cuda_event_times_ms(void*, int, const std::function<void()>&) {
  fail("GPU timing: this build has no CUDA backend");
}

double cuda_median_ms(void*, int, int, const std::function<void()>&) {
  fail("GPU timing: this build has no CUDA backend");
}

void cuda_warm_up(int) {}  // cuda_devices() gives none to warm up

size_t cuda_memory_used(int) { fail("GPU memory: this build has no CUDA backend"); }
#endif

}  // namespace rtvd
