#include "support/cuda_test_util.h"

#include <algorithm>
#include <cstring>

#include "pipeline/model_files/half.h"

namespace rtvd::test {

bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// CudaHost's stream does not wait for the legacy default stream that cudaMemcpy and cudaMemset use: each
// helper waits for the device before it returns (uploads, poison) or reads (results).
DeviceMemory to_device_bytes(const void* data, size_t bytes) {
  DeviceMemory m(bytes, "a test input");
  RTVD_CUDA_CHECK(cudaMemcpy(m.get(), data, bytes, cudaMemcpyHostToDevice));
  RTVD_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

DeviceMemory to_device_half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  return to_device_bytes(h.data(), h.size() * 2);
}

DeviceMemory to_device_float(const std::vector<float>& v) { return to_device_bytes(v.data(), v.size() * 4); }

namespace {
DeviceMemory filled(size_t bytes, int value) {
  DeviceMemory m(bytes, "a poisoned test output");
  RTVD_CUDA_CHECK(cudaMemset(m.get(), value, bytes));
  RTVD_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}
}  // namespace

DeviceMemory poisoned_half(size_t n) { return filled(n * 2, 0xff); }   // 0xffff is a NaN in fp16
DeviceMemory poisoned_float(size_t n) { return filled(n * 4, 0xff); }  // 0xffffffff is a NaN in fp32
DeviceMemory poisoned_bytes(size_t n) { return filled(n, 0xab); }

std::vector<float> from_device_half(const DeviceMemory& m, size_t n) {
  std::vector<uint16_t> h(n);
  RTVD_CUDA_CHECK(cudaDeviceSynchronize());
  RTVD_CUDA_CHECK(cudaMemcpy(h.data(), m.get(), n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = half_to_float(h[i]);
  return v;
}

std::vector<float> from_device_float(const DeviceMemory& m, size_t n) {
  std::vector<float> v(n);
  RTVD_CUDA_CHECK(cudaDeviceSynchronize());
  RTVD_CUDA_CHECK(cudaMemcpy(v.data(), m.get(), n * 4, cudaMemcpyDeviceToHost));
  return v;
}

std::vector<uint8_t> from_device_bytes(const DeviceMemory& m, size_t n) {
  std::vector<uint8_t> v(n);
  RTVD_CUDA_CHECK(cudaDeviceSynchronize());
  RTVD_CUDA_CHECK(cudaMemcpy(v.data(), m.get(), n, cudaMemcpyDeviceToHost));
  return v;
}

std::vector<float> HalfTensor::read(size_t n) const {
  std::vector<float> all = from_device_half(dev, n + offset);
  return {all.begin() + long(offset), all.end()};
}

HalfTensor half_tensor(std::vector<float> values, int misalign_bytes) {
  HalfTensor t;
  t.host = round_to_half(std::move(values));
  t.offset = size_t(misalign_bytes / 2);
  std::vector<float> padded(t.offset + t.host.size(), 0.0f);
  std::copy(t.host.begin(), t.host.end(), padded.begin() + long(t.offset));
  t.dev = to_device_half(padded);
  return t;
}

HalfTensor poisoned_half_tensor(size_t n, int misalign_bytes) {
  HalfTensor t;
  t.offset = size_t(misalign_bytes / 2);
  t.dev = poisoned_half(n + t.offset);
  return t;
}

}  // namespace rtvd::test
