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

std::optional<GpuInfo> chosen_gpu(DeviceKind device, std::string* why_cpu) {
  if (device == DeviceKind::Cpu) {
    if (why_cpu) *why_cpu = "--device cpu";
    return std::nullopt;
  }
  std::string why_not;
  const auto gpus = cuda_devices(&why_not);
  if (!gpus.empty()) return gpus.front();
  if (device == DeviceKind::Cuda) fail("--device cuda: ", why_not);
  if (why_cpu) *why_cpu = why_not;
  return std::nullopt;
}

std::unique_ptr<Backend> make_backend(DeviceKind device, int threads, KernelFamily kernels, std::string* note) {
  std::string why_cpu;
  const std::optional<GpuInfo> gpu = chosen_gpu(device, &why_cpu);
  if (!gpu && device != DeviceKind::Cpu && note) *note = why_cpu + "; using the CPU";
  return make_backend(gpu, threads, kernels, why_cpu);
}

// kernels chooses among CUDA kernels and threads sets the CPU's: each is refused where the other backend
// runs the model (the defaults, auto and 0, go anywhere). A build without CUDA has no usable GPU
// (cuda_devices says so), so gpu is empty there.
std::unique_ptr<Backend> make_backend([[maybe_unused]] const std::optional<GpuInfo>& gpu, int threads,
                                      KernelFamily kernels, const std::string& why_cpu) {
#if RTVD_HAS_CUDA
  if (gpu) {
    if (threads != 0)
      fail("--threads ", threads, ": CPU threads, but the model runs on the GPU (", gpu->name,
           "); --device cpu runs it on the CPU");
    return make_cuda_backend(*gpu, kernels);
  }
#endif
  if (kernels != KernelFamily::Auto)
    fail("--kernels ", kernel_family_name(kernels), ": a choice of CUDA kernels, but the model runs on the CPU (",
         why_cpu, ")");
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
