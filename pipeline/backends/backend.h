// A backend owns device memory and runs a graph's ops. Callers (the engine, tests, benchmarks) see only
// this interface; the CPU backend runs the fp32 references, the CUDA backend the fused fp16 kernels.
// Everything that allocates happens in upload_weights() and prepare(); run_*, write and read never do.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/graph/memory_budget.h"
#include "pipeline/backends/profiler.h"
#include "pipeline/graph/weights.h"

namespace rtvd {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string describe() const = 0;  // "cpu: 2 threads, OpenBLAS" / "cuda: NVIDIA H100 80GB HBM3 (sm_90)"
  virtual bool is_cuda() const = 0;
  virtual size_t act_bytes() const = 0;      // bytes of one activation element

  // Copies every weight of the store to backend memory (converted to the activation type where Act).
  virtual void upload_weights(const WeightStore& weights) = 0;
  // Plans the arena for this graph (growing it if needed) and binds every op to memory. The graph must
  // outlive its use; a later prepare() replaces it.
  virtual void prepare(Graph& graph) = 0;

  // Which implementation runs frame op i (e.g. "custom igemm 128x160", "cuDNN", "cuBLASLt"), for the
  // profile and the GUI; empty for an index past the frame.
  virtual std::string frame_op_impl(size_t i) const = 0;

  virtual void run_setup() = 0;  // the graph's setup ops, once per plan
  // The graph's frame ops, or its cached frame's (Graph::cached_frame, when it has one).
  virtual void run_frame(FrameOps which = FrameOps::Full) = 0;
  // The graph's check op i, now (in no frame's recording), after the work and writes queued so far.
  virtual void run_check(size_t i) = 0;
  // The caller changed scalar params of bound frame ops in place (e.g. the blend's first-frame flag):
  // anything recorded from them (a CUDA graph) must be made again.
  virtual void ops_changed() {}

  // Host <-> tensor. write: F32/Act tensors from float, I32 from int32. read: F32/Act to float,
  // U8 to bytes, I32 to int32. count in elements, from the tensor's start.
  virtual void write(Ref tensor, const void* host, size_t count) = 0;
  virtual void read(Ref tensor, void* host, size_t count) = 0;
  // Page-locks host memory in place until the handle is destroyed, which must come before the memory is freed,
  // so that read() into it and input_from() out of it run at the copy engine's rate (on an H200 a 1 MB read
  // into pageable memory took 123 us, into page-locked memory 27). Null where copies gain nothing from it (the
  // CPU's), and where the memory can't be locked (a page of it already is, with other memory): copies then
  // go through the driver's staging, as for any memory. Not for the frame loop: it costs like an allocation,
  // once per buffer.
  struct HostPin {
    virtual ~HostPin() = default;
  };
  virtual std::unique_ptr<HostPin> pin_host(void*, size_t) { return nullptr; }
  // A host vector's buffer page-locked for as long as it stays where it is, asked once per buffer.
  class VectorPin {
   public:
    // Before the vector may move its buffer (grows past its capacity): unlocked while it is still allocated.
    void release() { pin_.reset(), asked_for_ = nullptr; }
    // After it may have: locks the buffer if it is not the one last asked for.
    void keep(Backend& backend, std::vector<uint8_t>& v) {
      if (v.data() == asked_for_) return;
      pin_.reset();
      pin_ = backend.pin_host(v.data(), v.capacity());
      asked_for_ = v.data();
    }

   private:
    std::unique_ptr<HostPin> pin_;
    const void* asked_for_ = nullptr;
  };

  // A frame's inputs (Engine::write_inputs), without a stop on the host or a copy on the frame's path:
  // input_buffer() gives host memory for the first `count` elements of an F32 tensor, to be filled as floats or
  // as bytes b that become b / 127.5 - 1 on the device (InputFormat::Rgb8: an 8-bit RGB source image, a quarter
  // of the bytes to send), valid until the next input_buffer() or commit_inputs(). commit_inputs() sends every
  // input filled since the last commit; the next run_frame() reads them. On the GPU the copy runs on a stream
  // of its own while the frame before computes (CudaInputs, backends/cuda/input_uploads.h).
  enum class InputFormat { F32, Rgb8 };
  virtual void* input_buffer(Ref tensor, size_t count, InputFormat format) = 0;
  // The same for memory the caller filled: the `count` elements are read from `host` itself when
  // commit_inputs() sends them, not copied into the backend's memory first. The GPU copies from `host`
  // directly where it is page-locked (pin_host: Engine::source_frame), else through the driver's staging. The
  // caller keeps the bytes as they are until wait_inputs_read() returns.
  virtual void input_from(Ref tensor, const void* host, size_t count, InputFormat format) = 0;
  virtual void commit_inputs() = 0;
  // Returns once every input committed so far has been read from the caller's memory.
  virtual void wait_inputs_read() = 0;

  // Frames for the host without stalling the loop. begin_readback() queues a copy of the tensor's first
  // `bytes` (as stored: U8 tensors) after the work queued so far, into one of two host buffers, on a
  // second stream where there is one, so the copy runs while the next frame computes (a later frame that
  // writes the tensor waits for the copy on the GPU, not on the host). finish_readback() waits for the
  // oldest pending copy and returns its bytes, valid until the next begin_readback(). At most two are
  // pending.
  virtual void begin_readback(Ref tensor, size_t bytes) = 0;
  virtual const uint8_t* finish_readback() = 0;

  // A tensor in device memory and the stream whose work writes it (a cudaStream_t), for consumers that
  // read it on the GPU without a host round trip (the GUI's CUDA-OpenGL interop). Both null on the CPU.
  struct DeviceView {
    const void* data = nullptr;
    void* stream = nullptr;
  };
  virtual DeviceView device_view(Ref) { return {}; }

  // Profiling. While on, every frame's GPU time is measured, and frames time each op: every frame on the
  // CPU; on the GPU a sample of frames, as often as an overhead of at most 2% allows (FrameTimer).
  // Results are read once their frame has completed, never waited for.
  virtual void set_profiling(bool on) = 0;
  // Per-op ms (frame op i at [i]) of a frame completed since the last call, or empty: each frame once.
  virtual std::vector<float> frame_op_ms() = 0;
  // ms of the newest completed frame (GPU time on the GPU), 0 before one or when profiling is off.
  virtual float frame_gpu_ms() = 0;
  // Large-GEMM and large-copy rates of this device, measured now (allocates: not for the frame loop); none
  // where no rate measured once bounds the ops (the CPU's: Ceilings::none says why).
  virtual Ceilings measure_ceilings() = 0;
  // For benchmarks, after frames have run: GPU ms (median of `runs`, after warm-up) of each range [begin, end)
  // of the frame's ops replayed alone, with the layers' choices of the frames and no event between its ops
  // (op-timed frames add about 2 us per op), reading what the last frame left. Empty where the backend has
  // no such replay (the CPU's).
  virtual std::vector<double> time_op_ranges(const std::vector<std::pair<size_t, size_t>>&, int) { return {}; }

  virtual size_t arena_bytes() const = 0;
  virtual size_t weight_bytes() const = 0;
  virtual size_t workspace_bytes() const = 0;  // the ops' scratch held now (the GPU's ctx.workspace)
  // Memory this backend could still allocate (host memory on the CPU, free memory on the GPU), read before
  // a plan is built so that one too large is refused instead of allocated.
  virtual MemoryAvailable memory_available() const = 0;
};

std::unique_ptr<Backend> make_cpu_backend(int threads);  // threads 0 = by load (cpu_threads.h)

}  // namespace rtvd
