// The CUDA backend's host <-> device traffic: weight upload, host writes into graph tensors, synchronous
// reads, and the readback ring that hands frames to the host without stalling the loop.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "pipeline/backends/cuda/cuda_memory.h"
#include "pipeline/graph/bind.h"
#include "pipeline/graph/weights.h"

namespace rtvd {

// Every weight of the store in one device allocation, Act weights as fp16, each 256-byte aligned; their
// pointers and element types go to memory.weights / weight_elems. Through two pinned staging buffers: the
// host writes (reorders, converts) into one while the copy engine moves the other, so an fp16 checkpoint
// costs about one pass over its bytes. Returns when the copies are done.
DeviceMemory upload_weights(const WeightStore& store, cudaStream_t stream, BackendMemory& memory);

// Host data into graph tensors: Act from float (to fp16), others as they are. Each tensor has its own pinned
// staging buffer and the copy is asynchronous: the host waits only (rarely) for that buffer's previous copy.
class TensorWrites {
 public:
  TensorWrites() = default;
  TensorWrites(const TensorWrites&) = delete;
  TensorWrites& operator=(const TensorWrites&) = delete;
  ~TensorWrites();
  void write(int tensor, void* device, Elem e, const void* host, size_t count, cudaStream_t stream);

 private:
  struct Staging {
    PinnedMemory memory;
    cudaEvent_t copied = nullptr;  // recorded after the last copy out of memory
  };
  std::map<int, Staging> staging_;
};

// A tensor to the host after the stream's queued work, waited for: Act to float, others as they are.
void read_tensor(const void* device, Elem e, void* host, size_t count, cudaStream_t stream,
                 std::vector<uint16_t>& scratch);

// Two pinned host buffers filled on a copy stream of their own, so a frame's copy runs while the next
// frame computes (Backend::begin_readback / finish_readback).
class ReadbackRing {
 public:
  ReadbackRing();
  ReadbackRing(const ReadbackRing&) = delete;
  ReadbackRing& operator=(const ReadbackRing&) = delete;
  ~ReadbackRing();

  // Queues a copy of `bytes` from device after the work queued so far on `stream`. At most two pending.
  void begin(const void* device, size_t bytes, cudaStream_t stream);
  // Waits for the oldest pending copy; its bytes stay valid until the next begin().
  const uint8_t* finish();
  // Recorded after the newest copy: work that overwrites the source waits for it.
  cudaEvent_t copied_out() const { return copied_out_; }
  // Waits for every copy.
  void drain();

 private:
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t frame_queued_ = nullptr, copied_out_ = nullptr, done_[2] = {};
  PinnedMemory buffers_[2];
  int next_ = 0, pending_ = 0;
};

}  // namespace rtvd
