#include "pipeline/device.h"

#include "build_config.h"
#include "kernels/common/error.h"
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

// kernels chooses among CUDA kernels and threads sets the CPU's: each is refused where the other backend
// runs the model (the defaults, auto and 0, go anywhere).
std::unique_ptr<Backend> make_backend(DeviceKind device, int threads, KernelFamily kernels, std::string* note) {
  const auto on_the_cpu = [&](const std::string& why) {
    if (kernels != KernelFamily::Auto)
      fail("--kernels ", kernel_family_name(kernels), ": a choice of CUDA kernels, but the model runs on the CPU (",
           why, ")");
    return make_cpu_backend(threads);
  };
  if (device == DeviceKind::Cpu) return on_the_cpu("--device cpu");
  std::string why_not;
  const auto gpus = cuda_devices(&why_not);
#if RTVD_HAS_CUDA
  if (!gpus.empty()) {
    if (threads != 0)
      fail("--threads ", threads, ": CPU threads, but the model runs on the GPU (", gpus.front().name,
           "); --device cpu runs it on the CPU");
    return make_cuda_backend(gpus.front(), kernels);
  }
#endif
  if (device == DeviceKind::Cuda) fail("--device cuda: ", why_not);
  if (note) *note = why_not + "; using the CPU";
  return on_the_cpu(why_not);
}

std::future<void> start_device(DeviceKind device) {
  if (device == DeviceKind::Cpu) return {};
  return std::async(std::launch::async, [] {
    const auto gpus = cuda_devices(nullptr);
    if (!gpus.empty()) cuda_warm_up(gpus.front().index);  // the one make_backend takes
  });
}

}  // namespace rtvd
