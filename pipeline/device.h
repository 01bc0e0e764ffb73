// Backend selection: --device auto|cpu|cuda. auto takes a usable CUDA GPU (sm_80 or newer, a driver
// new enough) and otherwise the CPU, saying why in `note`; cuda asked for but unusable is an Error.
#pragma once
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/kernel_family.h"
#include "pipeline/backends/backend.h"
#include "pipeline/backends/gpu.h"

namespace rtvd {

// --device, parsed once from the flag.
enum class DeviceKind { Auto, Cpu, Cuda };
const char* device_kind_name(DeviceKind d);                // "auto" | "cpu" | "cuda"
std::vector<std::string> device_kind_names();              // the values --device takes
DeviceKind device_kind_named(const std::string& name);     // throws rtvd::Error naming --device for any other

// The GPU `device` runs on: none for cpu; the first usable one for auto and cuda. Where it is none,
// `why_cpu` says why ("--device cpu", or why no GPU can be used); cuda without one is an Error.
std::optional<GpuInfo> chosen_gpu(DeviceKind device, std::string* why_cpu);
// The backend `device` chooses; auto without a GPU says why in `note` ("...; using the CPU").
std::unique_ptr<Backend> make_backend(DeviceKind device, int threads, KernelFamily kernels, std::string* note);
// The backend on `gpu` (chosen_gpu's), or on the CPU for none. --kernels other than auto is refused on the
// CPU (naming why_cpu), --threads other than 0 on the GPU.
std::unique_ptr<Backend> make_backend(const std::optional<GpuInfo>& gpu, int threads, KernelFamily kernels,
                                      const std::string& why_cpu);
// Starts, on a thread of its own, what make_backend(device, ...) will make the slow part of: the GPU's CUDA
// context and libraries (cuda_warm_up); nothing for the CPU. The engine reads the model's files meanwhile.
std::future<void> start_device(DeviceKind device);

}  // namespace rtvd
