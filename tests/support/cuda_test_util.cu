#include "support/cuda_test_util.h"

#include <cstring>

#include "pipeline/half.h"

namespace rtvd::test {

bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  RTVD_CUDA_CHECK(cudaMalloc(&ptr_, bytes ? bytes : 1));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer to_device_half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  DeviceBuffer b(h.size() * 2);
  RTVD_CUDA_CHECK(cudaMemcpy(b.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  return b;
}

DeviceBuffer to_device_float(const std::vector<float>& v) {
  DeviceBuffer b(v.size() * 4);
  RTVD_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return b;
}

DeviceBuffer poisoned_half(size_t n) {
  DeviceBuffer b(n * 2);
  RTVD_CUDA_CHECK(cudaMemset(b.get(), 0xff, n * 2));  // 0xffff is a NaN in fp16
  return b;
}

DeviceBuffer poisoned_float(size_t n) {
  DeviceBuffer b(n * 4);
  RTVD_CUDA_CHECK(cudaMemset(b.get(), 0xff, n * 4));  // 0xffffffff is a NaN in fp32
  return b;
}

std::vector<float> from_device_half(const DeviceBuffer& b, size_t n) {
  std::vector<uint16_t> h(n);
  RTVD_CUDA_CHECK(cudaMemcpy(h.data(), b.get(), n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = half_to_float(h[i]);
  return v;
}

std::vector<float> from_device_float(const DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  RTVD_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * 4, cudaMemcpyDeviceToHost));
  return v;
}

std::vector<float> round_to_half(std::vector<float> v) {
  for (auto& x : v) x = half_to_float(float_to_half(x));
  return v;
}

TestCudaContext::TestCudaContext() : workspace(32u << 20), grid_sync(sizeof(unsigned)) {
  RTVD_CUDA_CHECK(cudaMemset(grid_sync.get(), 0, grid_sync.bytes()));
  ctx.grid_sync = grid_sync.as<unsigned>();
  RTVD_CUDA_CHECK(cudaStreamCreate(&ctx.stream));
  RTVD_CUBLAS_CHECK(cublasLtCreate(&ctx.cublaslt));
  ctx.workspace = workspace.get();
  ctx.workspace_bytes = workspace.bytes();
  int dev = 0;
  RTVD_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  RTVD_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  ctx.sm_count = prop.multiProcessorCount;
  ctx.sm_version = prop.major * 10 + prop.minor;
}

TestCudaContext::~TestCudaContext() {
  cublasLtDestroy(ctx.cublaslt);
  cudaStreamDestroy(ctx.stream);
}

}  // namespace rtvd::test
