// GPU test helpers: skip without a device, fp16 device buffers filled from / read into float vectors.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#if RTVD_HAS_CUDNN
#include <cudnn.h>
#endif

#include "kernels/cuda_context.cuh"

namespace rtvd::test {

bool cuda_device_available();
#define RTVD_SKIP_WITHOUT_CUDA() \
  if (!::rtvd::test::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

// Owns device memory; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

DeviceBuffer to_device_half(const std::vector<float>& v);  // rounds to fp16
DeviceBuffer to_device_float(const std::vector<float>& v);
DeviceBuffer poisoned_half(size_t n);  // NaN-filled
DeviceBuffer poisoned_float(size_t n);
std::vector<float> from_device_half(const DeviceBuffer& b, size_t n);
std::vector<float> from_device_float(const DeviceBuffer& b, size_t n);
// The values fp16 storage would hold: inputs for the CPU reference so both sides see the same numbers.
std::vector<float> round_to_half(std::vector<float> v);

// A context with a stream, a cuBLASLt handle, 32 MiB of workspace and a zeroed grid_sync word, for op tests.
struct TestCudaContext {
  CudaContext ctx;
  DeviceBuffer workspace, grid_sync;
  TestCudaContext();
  ~TestCudaContext();
};

#if RTVD_HAS_CUDNN
// A cuDNN handle for the *_cudnn launchers' tests.
struct CudnnHandle {
  cudnnHandle_t handle = nullptr;
  CudnnHandle() {
    if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) fail("cudnnCreate failed");
  }
  ~CudnnHandle() { cudnnDestroy(handle); }
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
};
#endif

}  // namespace rtvd::test
