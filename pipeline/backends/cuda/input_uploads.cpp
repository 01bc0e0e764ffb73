#include "pipeline/backends/cuda/input_uploads.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/cast/rgb8_to_float.cuh"

namespace rtvd {
namespace {

constexpr size_t kAlignment = 256;
size_t aligned(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

CudaInputs::CudaInputs() {
  RTVD_CUDA_CHECK(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking));
  for (cudaEvent_t& e : uploaded_) RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&consumed_, cudaEventDisableTiming));
}

CudaInputs::~CudaInputs() {
  // destructor: nothing to report to
  cudaStreamSynchronize(upload_stream_);
  cudaEventSynchronize(consumed_);
  for (cudaEvent_t e : uploaded_) cudaEventDestroy(e);
  cudaEventDestroy(consumed_);
  cudaStreamDestroy(upload_stream_);
}

void* CudaInputs::buffer(void* device, size_t bytes, bool rgb8) {
  if (!slot_free_) {  // the copy out of this slot, two commits ago: long done but for a host far ahead
    RTVD_CUDA_CHECK(cudaEventSynchronize(uploaded_[slot_]));
    slot_free_ = true;
  }
  const size_t offset = used_;
  used_ = aligned(offset + bytes);
  PinnedMemory& slot = slots_[slot_];
  if (slot.bytes() < used_) {  // the first frames of a plan: grows to the frame's inputs, then stays
    PinnedMemory grown(used_);
    if (offset > 0) std::memcpy(grown.get(), slot.get(), offset);
    slot = std::move(grown);
  }
  inputs_.push_back({device, offset, bytes, rgb8});
  return slot.get() + offset;
}

void CudaInputs::from(void* device, const void* host, size_t bytes, bool rgb8) {
  inputs_.push_back({device, 0, bytes, rgb8, host});
}

void CudaInputs::commit(cudaStream_t stream) {
  if (inputs_.empty()) return;
  size_t staged = used_;  // staging: the slot's bytes, then each of the caller's memory
  for (Input& in : inputs_)
    if (in.host) in.offset = staged, staged = aligned(staged + in.bytes);
  if (staging_.bytes() < staged) {  // its readers and writers in flight first
    RTVD_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));
    RTVD_CUDA_CHECK(cudaEventSynchronize(consumed_));
    staging_ = DeviceMemory();
    staging_ = DeviceMemory(staged, "frame input staging");
  }
  // Staging is free once the last frame's reads of it are done (at that frame's start, not its end).
  RTVD_CUDA_CHECK(cudaStreamWaitEvent(upload_stream_, consumed_, 0));
  if (used_ > 0)
    RTVD_CUDA_CHECK(
        cudaMemcpyAsync(staging_.get(), slots_[slot_].get(), used_, cudaMemcpyHostToDevice, upload_stream_));
  for (const Input& in : inputs_)
    if (in.host)
      RTVD_CUDA_CHECK(
          cudaMemcpyAsync(staging_.get() + in.offset, in.host, in.bytes, cudaMemcpyHostToDevice, upload_stream_));
  RTVD_CUDA_CHECK(cudaEventRecord(uploaded_[slot_], upload_stream_));
  RTVD_CUDA_CHECK(cudaStreamWaitEvent(stream, uploaded_[slot_], 0));
  for (const Input& in : inputs_) {
    const uint8_t* from = staging_.get() + in.offset;
    if (in.rgb8) rgb8_to_float({from, static_cast<float*>(in.device), int64_t(in.bytes)}, stream);
    else RTVD_CUDA_CHECK(cudaMemcpyAsync(in.device, from, in.bytes, cudaMemcpyDeviceToDevice, stream));
  }
  RTVD_CUDA_CHECK(cudaEventRecord(consumed_, stream));
  inputs_.clear();
  used_ = 0;
  slot_ ^= 1;
  slot_free_ = false;
}

void CudaInputs::wait_read() { RTVD_CUDA_CHECK(cudaEventSynchronize(uploaded_[slot_ ^ 1])); }

}  // namespace rtvd
