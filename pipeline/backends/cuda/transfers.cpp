#include "pipeline/backends/cuda/transfers.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "pipeline/graph/planner.h"
#include "pipeline/model_files/half.h"

namespace rtvd {
namespace {

size_t aligned(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

}  // namespace

DeviceMemory upload_weights(const WeightStore& store, cudaStream_t stream, BackendMemory& memory) {
  const auto& ws = store.tensors();
  size_t total = 0, largest = 0;
  for (const auto& w : ws) {
    const size_t bytes = aligned(size_t(w.numel()) * elem_bytes(w.elem, 2));
    total += bytes;
    largest = std::max(largest, bytes);
  }
  memory.weights.clear();
  memory.weight_elems.clear();
  DeviceMemory device(total, "weights");
  const size_t chunk = std::min(total, std::max(largest, size_t(64) << 20));
  PinnedMemory staging[2] = {PinnedMemory(chunk), PinnedMemory(chunk)};
  struct Events {
    cudaEvent_t copied[2] = {};
    ~Events() {
      for (cudaEvent_t e : copied)
        if (e) cudaEventDestroy(e);  // destructor: nothing to report to
    }
  } events;
  for (cudaEvent_t& e : events.copied) RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  int current = 0;
  size_t offset = 0, chunk_begin = 0, used = 0;
  auto send = [&] {
    RTVD_CUDA_CHECK(cudaMemcpyAsync(device.get() + chunk_begin, staging[current].get(), used, cudaMemcpyHostToDevice, stream));
    RTVD_CUDA_CHECK(cudaEventRecord(events.copied[current], stream));
    current ^= 1;
    RTVD_CUDA_CHECK(cudaEventSynchronize(events.copied[current]));  // the other buffer's copy is done
    chunk_begin += used;
    used = 0;
  };
  for (const auto& w : ws) {
    const size_t bytes = aligned(size_t(w.numel()) * elem_bytes(w.elem, 2));
    if (used + bytes > chunk) send();
    w.write(staging[current].get() + used, DType::F16);
    memory.weights.push_back(device.get() + offset);
    memory.weight_elems.push_back(w.elem);
    offset += bytes;
    used += bytes;
  }
  send();
  RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return device;
}

TensorWrites::~TensorWrites() {
  for (auto& [id, s] : staging_)
    if (s.copied) {
      cudaEventSynchronize(s.copied);  // destructor: nothing to report to
      cudaEventDestroy(s.copied);
    }
}

void TensorWrites::write(int tensor, void* device, Elem e, const void* host, size_t count, cudaStream_t stream) {
  const size_t bytes = count * elem_bytes(e, 2);
  Staging& st = staging_[tensor];
  if (!st.copied) RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&st.copied, cudaEventDisableTiming));
  RTVD_CUDA_CHECK(cudaEventSynchronize(st.copied));  // the previous copy from this buffer has read it
  if (st.memory.bytes() < bytes) st.memory = PinnedMemory(bytes);
  if (e == Elem::Act) {
    auto* h = st.memory.as<uint16_t>();
    const float* f = static_cast<const float*>(host);
    for (size_t i = 0; i < count; ++i) h[i] = float_to_half(f[i]);
  } else {
    std::memcpy(st.memory.get(), host, bytes);
  }
  RTVD_CUDA_CHECK(cudaMemcpyAsync(device, st.memory.get(), bytes, cudaMemcpyHostToDevice, stream));
  RTVD_CUDA_CHECK(cudaEventRecord(st.copied, stream));
}

void read_tensor(const void* device, Elem e, void* host, size_t count, cudaStream_t stream,
                 std::vector<uint16_t>& scratch) {
  if (e != Elem::Act) {
    RTVD_CUDA_CHECK(cudaMemcpyAsync(host, device, count * elem_bytes(e, 2), cudaMemcpyDeviceToHost, stream));
    RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  scratch.resize(count);
  RTVD_CUDA_CHECK(cudaMemcpyAsync(scratch.data(), device, count * 2, cudaMemcpyDeviceToHost, stream));
  RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
  float* f = static_cast<float*>(host);
  for (size_t i = 0; i < count; ++i) f[i] = half_to_float(scratch[i]);
}

ReadbackRing::ReadbackRing() {
  RTVD_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&frame_queued_, cudaEventDisableTiming));
  RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&copied_out_, cudaEventDisableTiming));
  for (cudaEvent_t& e : done_) RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

ReadbackRing::~ReadbackRing() {
  cudaStreamSynchronize(copy_stream_);  // destructor: nothing to report to
  for (cudaEvent_t e : done_) cudaEventDestroy(e);
  cudaEventDestroy(frame_queued_);
  cudaEventDestroy(copied_out_);
  cudaStreamDestroy(copy_stream_);
}

void ReadbackRing::begin(const void* device, size_t bytes, cudaStream_t stream) {
  if (pending_ == 2) fail("cuda backend: a third readback began before the first finished");
  const int slot = (next_ + pending_) % 2;
  if (buffers_[slot].bytes() < bytes) buffers_[slot] = PinnedMemory(bytes);
  RTVD_CUDA_CHECK(cudaEventRecord(frame_queued_, stream));
  RTVD_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, frame_queued_, 0));
  RTVD_CUDA_CHECK(cudaMemcpyAsync(buffers_[slot].get(), device, bytes, cudaMemcpyDeviceToHost, copy_stream_));
  RTVD_CUDA_CHECK(cudaEventRecord(done_[slot], copy_stream_));
  RTVD_CUDA_CHECK(cudaEventRecord(copied_out_, copy_stream_));
  ++pending_;
}

const uint8_t* ReadbackRing::finish() {
  if (pending_ == 0) fail("cuda backend: no readback pending");
  const int slot = next_;
  RTVD_CUDA_CHECK(cudaEventSynchronize(done_[slot]));
  next_ = (next_ + 1) % 2;
  --pending_;
  return buffers_[slot].get();
}

void ReadbackRing::drain() { RTVD_CUDA_CHECK(cudaStreamSynchronize(copy_stream_)); }

}  // namespace rtvd
