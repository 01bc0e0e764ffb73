// A frame's inputs on their way to the GPU off the frame's critical path (Backend::input_buffer/input_from/
// commit_inputs).
//
// The scheme: the host fills one of two pinned slots (the other may still be in a copy), or names memory of its
// own (input_from: a source frame, sent from where it is); commit queues one host-to-device copy of the slot,
// and one of each named memory, into a device staging buffer on an upload stream of its own, and then, on the
// compute stream (after that copy, through an event), one small step per input from staging into the plan's
// tensor: a device copy for floats, rgb8_to_float for an 8-bit image. The frame's graph reads only the plan's
// tensors, so the next frame's upload into staging runs while this frame computes; it waits only for this
// frame's staging reads (the `consumed` event recorded right after them, at the frame's start). The plan's
// tensors are written on the compute stream after the previous frame's work, as before.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "pipeline/backends/cuda/cuda_memory.h"

namespace rtvd {

class CudaInputs {
 public:
  CudaInputs();
  CudaInputs(const CudaInputs&) = delete;
  CudaInputs& operator=(const CudaInputs&) = delete;
  ~CudaInputs();

  // Host memory for `bytes` that go to `device` as they are (rgb8 false) or as bytes converted to floats.
  void* buffer(void* device, size_t bytes, bool rgb8);
  // The same bytes read from `host` itself at commit, kept unchanged by the caller until wait_read().
  void from(void* device, const void* host, size_t bytes, bool rgb8);
  // Queues the inputs filled since the last commit: their copy on the upload stream, then the steps into
  // the plan's tensors on `stream`.
  void commit(cudaStream_t stream);
  // Returns once the copies of the last commit have read their host memory.
  void wait_read();

 private:
  struct Input {
    void* device;
    size_t offset, bytes;  // offset: in the slot (and staging); for `host`'s, in staging, set at commit
    bool rgb8;
    const void* host = nullptr;  // the caller's memory (from()), else the slot's
  };
  cudaStream_t upload_stream_ = nullptr;
  cudaEvent_t uploaded_[2] = {};   // after the copies of the commit that sent slots_[i]
  cudaEvent_t consumed_ = nullptr;  // after the compute stream's reads of staging_
  PinnedMemory slots_[2];
  DeviceMemory staging_;
  int slot_ = 0;
  size_t used_ = 0;
  bool slot_free_ = false;  // slots_[slot_]'s last copy has been waited for
  std::vector<Input> inputs_;
};

}  // namespace rtvd
