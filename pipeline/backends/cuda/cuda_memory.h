// Move-only owners of CUDA memory for the backend: device buffers (checked against free memory first, so
// running out names what needed how much) and pinned host buffers (for copies that overlap compute).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "base/error.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// An allocation freed by Release; move-only.
template <cudaError_t (*Release)(void*)>
class CudaAllocation {
 public:
  CudaAllocation() = default;
  CudaAllocation(CudaAllocation&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaAllocation& operator=(CudaAllocation&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~CudaAllocation() {
    if (ptr_) Release(ptr_);  // destructor: nothing to report to
  }
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 protected:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Device memory, checked against free memory first.
class DeviceMemory : public CudaAllocation<cudaFree> {
 public:
  DeviceMemory() = default;
  DeviceMemory(size_t bytes, const char* what) {
    size_t free_bytes = 0, total = 0;
    RTVD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    if (bytes > free_bytes)
      fail("out of GPU memory allocating ", what, ": needs ", bytes, " bytes, ", free_bytes, " free of ", total);
    RTVD_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes, 256)));
    bytes_ = bytes;
  }
};

// Page-locked host memory: copies between it and the device are asynchronous.
class PinnedMemory : public CudaAllocation<cudaFreeHost> {
 public:
  PinnedMemory() = default;
  explicit PinnedMemory(size_t bytes) {
    RTVD_CUDA_CHECK(cudaMallocHost(&ptr_, std::max<size_t>(bytes, 256)));
    bytes_ = bytes;
  }
};

}  // namespace rtvd
