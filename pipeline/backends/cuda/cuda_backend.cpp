// The CUDA backend's frame: plan the arena, bind, choose each heavy layer's kernel (layer_choices.h), run
// the first frames eagerly, then capture one CUDA graph of the frame and replay it. The device context is
// the CUDA host module's (cuda_host.h), transfers are transfers.h's.
#include "pipeline/backends/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/attention/attention.cuh"
#include "kernels/canny/canny.cuh"
#include "kernels/cast/cast.cuh"
#include "kernels/common/nvtx_range.h"
#include "kernels/conv2d/conv2d.cuh"
#include "kernels/denoise/denoise.cuh"
#include "kernels/elementwise/elementwise.cuh"
#include "kernels/embedding/embedding.cuh"
#include "kernels/group_norm/group_norm.cuh"
#include "kernels/layer_norm/layer_norm.cuh"
#include "kernels/linear/linear.cuh"
#include "kernels/similarity/similarity.cuh"
#include "pipeline/backends/cuda/branch_streams.h"
#include "pipeline/backends/cuda/cuda_graph.h"
#include "pipeline/backends/cuda/cuda_host.h"
#include "pipeline/backends/cuda/frame_timer.h"
#include "pipeline/backends/cuda/layer_choices.h"
#include "pipeline/backends/cuda/input_uploads.h"
#include "pipeline/backends/cuda/transfers.h"
#include "pipeline/backends/gpu.h"
#include "pipeline/graph/bind.h"
#include "pipeline/graph/planner.h"

namespace rtvd {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

// Host memory the caller owns, page-locked in place while this lives (Backend::pin_host).
class RegisteredHost final : public Backend::HostPin {
 public:
  explicit RegisteredHost(void* host) : host_(host) {}
  RegisteredHost(const RegisteredHost&) = delete;
  RegisteredHost& operator=(const RegisteredHost&) = delete;
  ~RegisteredHost() override { cudaHostUnregister(host_); }  // destructor: nothing to report to

 private:
  void* host_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const GpuInfo& gpu, KernelFamily kernels)
      : gpu_(gpu), kernels_(kernels), host_(gpu.index),
        tuner_(kernels == KernelFamily::Auto ? std::make_unique<LayerTuner>(default_tuning_cache_path(), host_.device_key())
                                             : nullptr),
        lists_{FrameList(host_, kernels, tuner_.get()), FrameList(host_, kernels, tuner_.get())} {
#if !RTVD_HAS_CUDNN
    if (kernels == KernelFamily::Cudnn) fail("--kernels cudnn: this build has no cuDNN");
#endif
  }

  ~CudaBackend() override {
    cudaStreamSynchronize(host_.stream());  // copies from pinned staging may be in flight
    drop_graph();
  }

  std::string describe() const override {
    const char* family = kernels_ == KernelFamily::Cudnn ? "cuDNN convolutions and attention"
                         : kernels_ == KernelFamily::Auto ? "autotuned convolutions and attention"
                                                          : "custom kernels";
    return cat("cuda: ", gpu_.name, " (sm_", gpu_.sm, "), fp16, ", family, ", one CUDA graph per frame");
  }
  bool is_cuda() const override { return true; }
  size_t act_bytes() const override { return 2; }

  void upload_weights(const WeightStore& store) override {
    if (store.tensors().size() == memory_.weights.size() && weights_.bytes()) return;  // unchanged since the last plan
    weights_ = DeviceMemory();
    weights_ = rtvd::upload_weights(store, host_.stream(), memory_);
  }

  void prepare(Graph& graph) override {
    drop_graph();
    readback_.drain();  // readbacks of the old plan's memory are done
    readback_tensor_ = -1;
    graph_ = &graph;
    plan_ = plan_arena(graph, 2);
    if (plan_.bytes > arena_.bytes()) {
      arena_ = DeviceMemory();
      arena_ = DeviceMemory(plan_.bytes, "activations");
      // Poisoned: all-ones bytes are NaN in fp16 and fp32, so a read of an element no op wrote shows as
      // NaN in the output, which every GPU test rejects. (compute-sanitizer's initcheck cannot see the TMA
      // stores of cuBLASLt's sm_90 kernels and would report reads of their outputs otherwise.)
      RTVD_CUDA_CHECK(cudaMemsetAsync(arena_.get(), 0xFF, arena_.bytes(), host_.stream()));
    }
    memory_.arena = arena_.get();
    memory_.plan = &plan_;
    memory_.act_bytes = 2;
    bind_ops(graph, graph.setup, memory_);
    bind_ops(graph, graph.frame, memory_);
    bind_ops(graph, graph.check, memory_);
    bind_ops(graph, graph.cached_frame, memory_);
    size_t workspace = setup_workspace_bytes();
    for (const FrameOps which : {FrameOps::Full, FrameOps::Cached}) {
      FrameList& l = list(which);
      l.runs = 0;
      workspace = std::max(workspace, l.choices.prepare(graph.frame_ops(which)));
    }
    host_.with_workspace(workspace);
  }

  void run_setup() override {
    run(graph().setup, nullptr, false);
    RTVD_CUDA_CHECK(cudaStreamSynchronize(host_.stream()));
  }

  // The first run of a plan is eager (libraries do their lazy set-up outside any capture); later runs replay
  // one CUDA graph of every frame op. With `auto` one more run after the first output is eager too: it times
  // the convs' candidates, the linears' cuBLASLt algorithms and the attention layers' implementations (~1.5 s
  // for SD-Turbo's U-Net and TAESD, and ~1 s more the first time cuDNN compiles its attention kernels on a
  // machine; kept off the time to first output). Each frame list (the cached frame's too) goes through this
  // on its own runs, with its own graph. Per-op times are the full frame's: a cached frame is timed whole.
  void run_frame(FrameOps which) override {
    FrameList& l = list(which);
    ++l.runs;
    const bool tuning_frame = tuner_ && l.runs == LayerChoices::kTunedAtFrame;
    if (!l.exec && l.eager_runs > 0 && !tuning_frame) capture(which);
    if (l.exec) {
      const bool op_timed = profiling_ && which == FrameOps::Full && timer_.want_op_times();
      if (profiling_) timer_.frame_begin(host_.stream(), op_timed);
      RTVD_CUDA_CHECK(cudaGraphLaunch(op_timed ? l.exec_op_timed : l.exec, host_.stream()));
      if (profiling_) timer_.frame_end(host_.stream());
      return;
    }
    const bool tuning = tuning_frame && l.choices.undecided();
    run(graph().frame_ops(which), &l, false);
    ++l.eager_runs;
    if (tuning) {
      tuner_->save();
      shrink_workspace();
    }
  }

  // Queued on the stream, after the frame before and the writes since: a read waits for it.
  void run_check(size_t i) override { run(graph().check, nullptr, false, i, i + 1); }

  std::string frame_op_impl(size_t i) const override {
    if (!graph_ || i >= graph_->frame.size()) return "";
    const std::string chosen = lists_[0].choices.describe(i);  // the full frame's ops
    return chosen.empty() ? "custom" : chosen;
  }

  void ops_changed() override { drop_graph(); }

  // See FrameTimer: every frame timed whole, sampled frames per op.
  void set_profiling(bool on) override {
    if (on == profiling_) return;
    drop_graph();
    profiling_ = on;
  }
  std::vector<float> frame_op_ms() override { return profiling_ ? timer_.take_op_ms() : std::vector<float>{}; }
  float frame_gpu_ms() override { return profiling_ ? timer_.last_frame_ms() : 0.0f; }
  Ceilings measure_ceilings() override { return host_.measure_ceilings(); }

  void write(Ref tensor, const void* host, size_t count) override {
    writes_.write(tensor.id, resolve(graph(), memory_, tensor), graph().tensors.at(tensor.id).elem, host, count,
                  host_.stream());
  }

  void* input_buffer(Ref tensor, size_t count, InputFormat format) override {
    if (graph().tensors.at(tensor.id).elem != Elem::F32) fail("cuda backend: frame input ", tensor.id, " is not F32");
    const bool rgb8 = format == InputFormat::Rgb8;
    return inputs_.buffer(resolve(graph(), memory_, tensor), count * (rgb8 ? 1 : sizeof(float)), rgb8);
  }
  void input_from(Ref tensor, const void* host, size_t count, InputFormat format) override {
    if (graph().tensors.at(tensor.id).elem != Elem::F32) fail("cuda backend: frame input ", tensor.id, " is not F32");
    const bool rgb8 = format == InputFormat::Rgb8;
    inputs_.from(resolve(graph(), memory_, tensor), host, count * (rgb8 ? 1 : sizeof(float)), rgb8);
  }
  void commit_inputs() override { inputs_.commit(host_.stream()); }
  void wait_inputs_read() override { inputs_.wait_read(); }

  void read(Ref tensor, void* host, size_t count) override {
    read_tensor(resolve(graph(), memory_, tensor), graph().tensors.at(tensor.id).elem, host, count, host_.stream(),
                read_scratch_);
  }

  std::unique_ptr<HostPin> pin_host(void* host, size_t bytes) override {
    if (!host || bytes == 0) return nullptr;
    if (cudaHostRegister(host, bytes, cudaHostRegisterDefault) != cudaSuccess) {
      cudaGetLastError();  // not sticky: a range that overlaps locked memory, or no memory left to lock
      return nullptr;
    }
    return std::make_unique<RegisteredHost>(host);
  }

  void begin_readback(Ref tensor, size_t bytes) override {
    if (readback_tensor_ != tensor.id) {  // the graph must wait for this tensor's copies before writing it
      readback_tensor_ = tensor.id;
      drop_graph();
    }
    readback_.begin(resolve(graph(), memory_, tensor), bytes, host_.stream());
  }
  const uint8_t* finish_readback() override { return readback_.finish(); }

  DeviceView device_view(Ref tensor) override { return {resolve(graph(), memory_, tensor), host_.stream()}; }

  size_t arena_bytes() const override { return arena_.bytes(); }
  size_t weight_bytes() const override { return weights_.bytes(); }
  size_t workspace_bytes() const override { return host_.ctx().workspace_bytes; }
  MemoryAvailable memory_available() const override {
    size_t free_bytes = 0, total = 0;
    RTVD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    return {int64_t(free_bytes), cat("free memory on ", gpu_.name)};
  }

 private:
  Graph& graph() {
    if (!graph_) fail("cuda backend: no graph prepared");
    return *graph_;
  }

  // Setup convs run their default candidate (conv2d()): room for the largest.
  size_t setup_workspace_bytes() {
    size_t need = CudaHost::kLibraryWorkspace;
    for (const Op& op : graph().setup)
      if (auto* c = std::get_if<ConvOp>(&op.body)) {
        const std::vector<Conv2dCandidate> all = conv2d_candidates(c->p, host_.ctx());
        const Conv2dCandidate& d = default_candidate(all, c->p, host_.ctx(), KernelFamily::Custom, "conv2d");
        need = std::max(need, d.workspace_bytes(c->p, host_.ctx()));
      }
    return need;
  }

  // One frame op list's state: its layers' choices, its graphs, and its runs since prepare().
  struct FrameList {
    FrameList(CudaHost& host, KernelFamily kernels, LayerTuner* tuner) : choices(host, kernels, tuner) {}
    LayerChoices choices;
    cudaGraphExec_t exec = nullptr, exec_op_timed = nullptr;
    int eager_runs = 0;
    int runs = 0;  // begun since prepare(), the one running included
  };
  FrameList& list(FrameOps which) { return lists_[which == FrameOps::Cached ? 1 : 0]; }

  // Tuning grew the scratch for every candidate (split-K 8 at 64x64 takes ~80 MB); keep what the chosen
  // implementations need.
  void shrink_workspace() {
    size_t need = setup_workspace_bytes();
    for (const FrameList& l : lists_) need = std::max(need, l.choices.workspace_bytes());
    if (need >= host_.ctx().workspace_bytes) return;
    host_.resize_workspace(need);
    // cuBLASLt plans depend on the scratch size: made again eagerly, never under capture
    for (FrameList& l : lists_) l.eager_runs = 0;
  }

  void drop_graph() {
    for (FrameList& l : lists_) {
      for (cudaGraphExec_t* e : {&l.exec, &l.exec_op_timed}) {
        if (*e) cudaGraphExecDestroy(*e);
        *e = nullptr;
      }
      l.eager_runs = 0;
    }
  }

  // Each range captured as a graph of its own and replayed back to back, events around each replay.
  std::vector<double> time_op_ranges(const std::vector<std::pair<size_t, size_t>>& ranges, int runs) override {
    const FrameList& full = list(FrameOps::Full);
    if (full.eager_runs == 0 || full.choices.undecided())  // what capture() needs
      fail("time_op_ranges: the frame has not run since its plan or profiling changed (run frames first)");
    std::vector<double> out;
    for (const auto& [begin, end] : ranges) {
      if (begin >= end || end > graph().frame.size())
        fail("time_op_ranges: ops [", begin, ", ", end, ") are not a range of the frame's ", graph().frame.size());
      const std::unique_ptr<CUgraphExec_st, decltype(&cudaGraphExecDestroy)> exec(
          capture_frame(FrameOps::Full, false, begin, end), cudaGraphExecDestroy);
      out.push_back(cuda_median_ms(host_.stream(), 3, runs,
                                   [&] { RTVD_CUDA_CHECK(cudaGraphLaunch(exec.get(), host_.stream())); }));
    }
    return out;
  }

  // A frame list as a graph; with profiling, for the full frame, also a second one with an event between
  // every two ops.
  void capture(FrameOps which) {
    FrameList& l = list(which);
    if (profiling_ && which == FrameOps::Full) {
      timer_.reset(graph().frame.size());
      l.exec_op_timed = capture_frame(which, true);
    }
    l.exec = capture_frame(which, false);
  }

  // A frame list's ops [begin, end) (all by default) as a graph. The whole full frame, without op events, runs
  // its branches (Graph::branches) on streams of their own (BranchStreams); op-timed frames and ranges replayed
  // alone run every op in order on the one stream, so that each op's time is its own.
  cudaGraphExec_t capture_frame(FrameOps which, bool op_timed, size_t begin = 0, size_t end = SIZE_MAX) {
    const bool branched = which == FrameOps::Full && !op_timed && begin == 0 && end == SIZE_MAX &&
                          !graph().branches.empty();
    if (branched) branches_.prepare(graph().branches, host_.ctx());
    capturing_ = true;
    try {
      const cudaGraphExec_t exec = capture_graph(host_.stream(), [&] {
        run(graph().frame_ops(which), &list(which), op_timed, begin, end, branched ? &branches_ : nullptr);
      });
      capturing_ = false;
      return exec;
    } catch (...) {
      capturing_ = false;
      throw;
    }
  }

  // Queues ops [begin, end) on the stream (all by default). frame: the frame list's state, null for the setup
  // ops, which run each op's default. op_timed (all frame ops under capture): an event node before every op
  // and after the last, External so that the nodes keep their timestamps. branches (the full frame under
  // capture): each op on the stream its branch gives it. An op that is off (Op::off) runs nothing.
  void run(std::vector<Op>& ops, FrameList* frame, bool op_timed, size_t begin = 0, size_t end = SIZE_MAX,
           BranchStreams* branches = nullptr) {
    for (size_t i = begin; i < std::min(end, ops.size()); ++i) {
      const CudaContext& c = branches ? branches->before_op(i) : host_.ctx();
      Op& op = ops[i];
      const NvtxRange layer(op.layer.c_str());  // under capture, Nsight Systems projects it onto the graph's nodes
      if (op_timed) RTVD_CUDA_CHECK(cudaEventRecordWithFlags(timer_.op_event(i), c.stream, cudaEventRecordExternal));
      if (op.off) {  // no kernel: its op event stays, and its branch still forks and joins around it
        if (branches) branches->after_op(i);
        continue;
      }
      if (frame && touches(op, readback_tensor_))  // the last readback of this tensor must have read it
        RTVD_CUDA_CHECK(cudaStreamWaitEvent(c.stream, readback_.copied_out(), capturing_ ? cudaEventWaitExternal : 0));
      const auto heavy = [&](auto& o, void (*by_default)(const decltype(o.p)&, const CudaContext&)) {
        if (frame) frame->choices.run(i, op, frame->runs, capturing_, branches ? &c : nullptr);
        else by_default(o.p, c);
      };
      std::visit(Overloaded{
                     [&](ConvOp& o) { heavy(o, conv2d); },
                     [&](AttentionOp& o) { heavy(o, attention); },
                     [&](LinearOp& o) { heavy(o, linear); },
                     [&](GroupNormOp& o) {
                       if (!frame || !frame->choices.norm_skipped(i)) group_norm(o.p, c);
                     },
                     [&](LayerNormOp& o) { layer_norm(o.p, c); },
                     [&](GegluOp& o) { geglu(o.p, c); },
                     [&](SiluOp& o) { silu(o.p, c); },
                     [&](Upsample2xOp& o) { upsample2x(o.p, c); },
                     [&](ConcatOp& o) { concat(o.p, c); },
                     [&](TimestepEmbeddingOp& o) { timestep_embedding(o.p, c); },
                     [&](EmbeddingOp& o) { embedding(o.p, c); },
                     [&](FilmOp& o) { film(o.p, c); },
                     [&](CastOp& o) { cast(o.p, c); },
                     [&](GuidanceStepOp& o) { guidance_step(o.p, c); },
                     [&](DenoiseBlendOp& o) { denoise_blend(o.p, c); },
                     [&](ScaleActivationOp& o) { scale_activation(o.p, c); },
                     [&](SimilarityOp& o) { similarity(o.p, c); },
                     [&](CannyOp& o) { canny(o.p, c); },
                 },
                 op.body);
      if (branches) branches->after_op(i);
    }
    if (branches) branches->join_rest();
    if (op_timed)
      RTVD_CUDA_CHECK(cudaEventRecordWithFlags(timer_.op_event(ops.size()), host_.stream(), cudaEventRecordExternal));
  }

  GpuInfo gpu_;
  KernelFamily kernels_;
  CudaHost host_;
  std::unique_ptr<LayerTuner> tuner_;  // --kernels auto only
  FrameList lists_[2];  // FrameOps::Full, FrameOps::Cached
  Graph* graph_ = nullptr;
  ArenaPlan plan_;
  BackendMemory memory_;
  DeviceMemory arena_, weights_;
  TensorWrites writes_;
  CudaInputs inputs_;
  ReadbackRing readback_;
  std::vector<uint16_t> read_scratch_;
  int readback_tensor_ = -1;
  bool profiling_ = false, capturing_ = false;
  FrameTimer timer_;
  BranchStreams branches_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const GpuInfo& gpu, KernelFamily kernels) {
  return std::make_unique<CudaBackend>(gpu, kernels);
}

}  // namespace rtvd
