#include "device.h"

#include "build_config.h"
#include "error.h"
#if RTVD_HAS_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace rtvd {

#if !RTVD_HAS_CUDA
std::vector<GpuInfo> cuda_devices(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA backend (no CUDA toolkit at configure time)";
  return {};
}

std::vector<double> cuda_event_times_ms(void*, int, const std::function<void()>&) {
  fail("GPU timing: this build has no CUDA backend");
}

double cuda_median_ms(void*, int, int, const std::function<void()>&) {
  fail("GPU timing: this build has no CUDA backend");
}

size_t cuda_memory_used(int) { fail("GPU memory: this build has no CUDA backend"); }
#endif

std::unique_ptr<Backend> make_backend(const std::string& device, int threads, const std::string& kernels,
                                      std::string* note) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    fail("--device ", device, ": expected auto, cpu or cuda");
  if (kernels != "auto" && kernels != "custom" && kernels != "cudnn")
    fail("--kernels ", kernels, ": expected auto, custom or cudnn");
  if (device == "cpu") return make_cpu_backend(threads);
  std::string why_not;
  const auto gpus = cuda_devices(&why_not);
#if RTVD_HAS_CUDA
  if (!gpus.empty()) return make_cuda_backend(gpus.front(), kernels);
#endif
  if (device == "cuda") fail("--device cuda: ", why_not);
  if (note) *note = why_not + "; using the CPU";
  return make_cpu_backend(threads);
}

}  // namespace rtvd
