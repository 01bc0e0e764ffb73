// Backend selection: --device auto|cpu|cuda. auto takes a usable CUDA GPU (sm_80 or newer, a driver
// new enough) and otherwise the CPU, saying why in `note`; cuda asked for but unusable is an Error.
#pragma once
#include <functional>
#include <future>
#include <memory>
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

std::unique_ptr<Backend> make_backend(DeviceKind device, int threads, KernelFamily kernels, std::string* note);
// Starts, on a thread of its own, what make_backend(device, ...) will make the slow part of: the GPU's CUDA
// context and libraries (cuda_warm_up); nothing for the CPU. The engine reads the model's files meanwhile.
std::future<void> start_device(DeviceKind device);

}  // namespace rtvd
