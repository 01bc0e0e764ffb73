#include "pipeline/device.h"

#include "base/error.h"
#include "build_config.h"
#if RTVD_HAS_CUDA
#include "pipeline/backends/cuda/cuda_backend.h"
#endif

namespace rtvd {


const char* device_kind_name(DeviceKind d) {
  switch (d) {
    case DeviceKind::Auto: return "auto";
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
  }
  return "?";
}

std::vector<std::string> device_kind_names() {
  return {device_kind_name(DeviceKind::Auto), device_kind_name(DeviceKind::Cpu), device_kind_name(DeviceKind::Cuda)};
}

DeviceKind device_kind_named(const std::string& name) {
  for (DeviceKind d : {DeviceKind::Auto, DeviceKind::Cpu, DeviceKind::Cuda})
    if (name == device_kind_name(d)) return d;
  fail("--device ", name, ": expected auto, cpu or cuda");
}

// kernels chooses among CUDA kernels: the CPU backend has one implementation per op and ignores it.
std::unique_ptr<Backend> make_backend(DeviceKind device, int threads, [[maybe_unused]] KernelFamily kernels,
                                      std::string* note) {
  if (device == DeviceKind::Cpu) return make_cpu_backend(threads);
  std::string why_not;
  const auto gpus = cuda_devices(&why_not);
#if RTVD_HAS_CUDA
  if (!gpus.empty()) return make_cuda_backend(gpus.front(), kernels);
#endif
  if (device == DeviceKind::Cuda) fail("--device cuda: ", why_not);
  if (note) *note = why_not + "; using the CPU";
  return make_cpu_backend(threads);
}

std::future<void> start_device(DeviceKind device) {
  if (device == DeviceKind::Cpu) return {};
  return std::async(std::launch::async, [] {
    const auto gpus = cuda_devices(nullptr);
    if (!gpus.empty()) cuda_warm_up(gpus.front().index);  // the one make_backend takes
  });
}

}  // namespace rtvd
