// GPU test helpers: skip without a device; device memory (pipeline/backends/cuda/cuda_memory.h) filled from
// and read into float vectors; fp16 tensors that keep on the host the values fp16 holds (the CPU reference's
// inputs), optionally off their alignment; and the candidates of an op (kernels/common/candidate.cuh) that
// can run a case. The context, stream, library handles and workspace come from the CUDA host module
// (CudaHost), as in the app.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/candidate.cuh"
#include "pipeline/backends/cuda/cuda_host.h"
#include "pipeline/backends/cuda/cuda_memory.h"
#include "support/test_util.h"

namespace rtvd::test {

bool cuda_device_available();
#define RTVD_SKIP_WITHOUT_CUDA() \
  if (!::rtvd::test::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

DeviceMemory to_device_half(const std::vector<float>& v);  // rounds to fp16
DeviceMemory to_device_float(const std::vector<float>& v);
DeviceMemory to_device_bytes(const void* data, size_t bytes);
DeviceMemory poisoned_half(size_t n);   // NaN-filled
DeviceMemory poisoned_float(size_t n);  // NaN-filled
DeviceMemory poisoned_bytes(size_t n);  // 0xab-filled
std::vector<float> from_device_half(const DeviceMemory& m, size_t n);
std::vector<float> from_device_float(const DeviceMemory& m, size_t n);
std::vector<uint8_t> from_device_bytes(const DeviceMemory& m, size_t n);

// An fp16 tensor: the values fp16 holds (host, for the reference) and a device copy that starts
// misalign_bytes (even) into its allocation, so its pointer is only that aligned.
struct HalfTensor {
  std::vector<float> host;
  DeviceMemory dev;
  size_t offset = 0;  // elements
  void* get() const { return dev.as<__half>() + offset; }
  std::vector<float> read(size_t n) const;  // n elements from get()
};
HalfTensor half_tensor(std::vector<float> values, int misalign_bytes = 0);
HalfTensor poisoned_half_tensor(size_t n, int misalign_bytes = 0);

// Of an op's candidates, those of_kind admits that can run p, best-ranked first; *refused gets "name: why"
// for those of the kind that can't.
template <class C, class P>
std::vector<const C*> runnable_candidates(const std::vector<C>& all, const P& p, const CudaContext& ctx,
                                          const std::function<bool(const C&)>& of_kind, std::string* refused) {
  std::vector<const C*> out;
  for (const C& c : all) {
    if (!of_kind(c)) continue;
    std::string why;
    if (c.can_implement(p, ctx, &why)) out.push_back(&c);
    else *refused += (refused->empty() ? "" : "; ") + c.name + ": " + why;
  }
  return out;
}

// The fixture of an op's tests on the device, over its case table: skips without a device, else a CUDA host
// (context, stream, library handles, workspace) and fresh random inputs.
template <class Case>
class OnCuda : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    RTVD_SKIP_WITHOUT_CUDA();
    host_ = std::make_unique<CudaHost>();
  }
  const CudaContext& ctx() const { return host_->ctx(); }
  void sync() const { RTVD_CUDA_CHECK(cudaStreamSynchronize(host_->stream())); }
  Rng rng;
  std::unique_ptr<CudaHost> host_;
};

}  // namespace rtvd::test
