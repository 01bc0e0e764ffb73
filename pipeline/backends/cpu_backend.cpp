// The CPU backend: fp32 everywhere, every op through its reference in kernels/cpu (BLAS + OpenMP).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cast/rgb8_to_float.h"
#include "kernels/common/cpu_cancel.h"
#include "base/error.h"
#include "pipeline/backends/backend.h"
#include "pipeline/backends/cpu_threads.h"
#include "pipeline/backends/cancel.h"
#include "pipeline/graph/bind.h"
#include "pipeline/graph/planner.h"

namespace rtvd {

namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;

// Linux grants more than it has and the OOM killer collects later: what cannot fit now is refused now.
HostBuffer allocate(size_t bytes, const char* what) {
  require_memory(cat("cpu backend: allocating ", what), int64_t(bytes), "", host_memory_available());
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 64) + 63) / 64 * 64);
  if (!p) fail("out of host memory allocating ", bytes, " bytes");
  return HostBuffer(static_cast<uint8_t*>(p));
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

class CpuBackend final : public Backend {
 public:
  // Also for the parallel loops that run before the first frame (the weights' conversion).
  explicit CpuBackend(int threads) : threads_(threads) { omp_set_num_threads(threads_.for_frame()); }

  std::string describe() const override {
    if (!threads_.adaptive()) return cat("cpu: ", threads_.most(), " threads, fp32, OpenBLAS");
    return cat("cpu: up to ", threads_.most(), " threads (as CPUs are free), fp32, OpenBLAS");
  }
  bool is_cuda() const override { return false; }
  size_t act_bytes() const override { return 4; }

  void upload_weights(const WeightStore& store) override {
    const auto& ws = store.tensors();
    if (ws.size() == memory_.weights.size()) return;  // unchanged since the last plan
    auto padded = [](const WeightTensor& w) { return (w.numel() * 4 + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; };
    size_t total = 0;
    for (const auto& w : ws) total += padded(w);
    weights_ = allocate(total, "weights");
    weight_bytes_ = total;
    memory_.weights.clear();
    memory_.weight_elems.clear();
    size_t offset = 0;
    for (const auto& w : ws) {
      uint8_t* p = weights_.get() + offset;
      w.write(p, DType::F32);
      memory_.weights.push_back(p);
      memory_.weight_elems.push_back(w.elem);
      offset += padded(w);
    }
  }

  void prepare(Graph& graph) override {
    graph_ = &graph;
    plan_ = plan_arena(graph, 4);
    if (plan_.bytes > arena_bytes_) {
      arena_ = allocate(plan_.bytes, "activations");
      arena_bytes_ = plan_.bytes;
    }
    memory_.arena = arena_.get();
    memory_.plan = &plan_;
    memory_.act_bytes = 4;
    bind_ops(graph, graph.setup, memory_);
    bind_ops(graph, graph.frame, memory_);
    bind_ops(graph, graph.check, memory_);
    bind_ops(graph, graph.cached_frame, memory_);

    // One scratch buffer serves every op's workspace: ops run one at a time.
    size_t scratch = 0;
    for (auto* list : {&graph.setup, &graph.frame, &graph.cached_frame})
      for (Op& op : *list) {
        if (auto* c = std::get_if<ConvOp>(&op.body)) scratch = std::max(scratch, conv2d_cpu_workspace_bytes(c->p));
        if (auto* a = std::get_if<AttentionOp>(&op.body)) scratch = std::max(scratch, attention_cpu_workspace_bytes(a->p));
      }
    if (scratch > scratch_bytes_) {
      scratch_ = allocate(scratch, "workspace");
      scratch_bytes_ = scratch;
    }
    for (auto* list : {&graph.setup, &graph.frame, &graph.cached_frame})
      for (Op& op : *list) {
        if (auto* c = std::get_if<ConvOp>(&op.body)) c->p.workspace = scratch_.get(), c->p.workspace_bytes = scratch_bytes_;
        if (auto* a = std::get_if<AttentionOp>(&op.body)) a->p.workspace = scratch_.get(), a->p.workspace_bytes = scratch_bytes_;
      }
  }

  std::string frame_op_impl(size_t i) const override {
    if (!graph_ || i >= graph_->frame.size()) return "";
    const OpBody& body = graph_->frame[i].body;
    return std::holds_alternative<ConvOp>(body) || std::holds_alternative<LinearOp>(body) ? "cpu OpenBLAS" : "cpu";
  }

  // omp_set_num_threads before each list: it sets the calling thread's count, and the engine may be
  // driven from another thread than the one that made it.
  void run_setup() override {
    omp_set_num_threads(threads_.for_frame());
    run(graph().setup, nullptr, false);
  }
  // Op times are those of the full frame's ops (frame_op_ms): a cached frame is timed whole.
  void run_frame(FrameOps which) override {
    omp_set_num_threads(threads_.for_frame());
    std::vector<Op>& ops = graph().frame_ops(which);
    if (!profiling_) return run(ops, nullptr, true);
    std::vector<float> op_ms(ops.size(), 0.0f);
    run(ops, &op_ms, true);
    frame_ms_ = 0;
    for (float ms : op_ms) frame_ms_ += ms;
    if (which == FrameOps::Full) op_ms_ = std::move(op_ms);
  }

  void run_check(size_t i) override {
    omp_set_num_threads(threads_.for_frame());
    run(graph().check, nullptr, false, i, i + 1);
  }

  void set_profiling(bool on) override {
    profiling_ = on;
    op_ms_.clear();
    frame_ms_ = 0;
  }
  std::vector<float> frame_op_ms() override { return std::exchange(op_ms_, {}); }
  float frame_gpu_ms() override { return frame_ms_; }

  // A large sgemm's and memcpy's rates bound nothing here: the frame's small tensors stay in the caches, which
  // copy faster than memory, and other programs share the cores, so one measurement was beaten by ops of
  // the same run (112% of the "peak").
  Ceilings measure_ceilings() override {
    Ceilings c;
    c.none = "the CPU's ops run from its caches, on cores other programs share: no rate measured once bounds them";
    return c;
  }

  void write(Ref tensor, const void* host, size_t count) override {
    std::memcpy(resolve(graph(), memory_, tensor), host, count * 4);
  }

  // Floats straight into the tensor; bytes into a scratch buffer, converted by the commit.
  void* input_buffer(Ref tensor, size_t count, InputFormat format) override {
    float* data = static_cast<float*>(resolve(graph(), memory_, tensor));
    if (format == InputFormat::F32) return data;
    rgb8_input_.resize(count);
    rgb8_target_ = {rgb8_input_.data(), data, int64_t(count)};
    return rgb8_input_.data();
  }
  void input_from(Ref tensor, const void* host, size_t count, InputFormat format) override {
    if (format == InputFormat::F32) {
      std::memcpy(input_buffer(tensor, count, format), host, count * sizeof(float));
      return;
    }
    rgb8_target_ = {static_cast<const uint8_t*>(host), static_cast<float*>(resolve(graph(), memory_, tensor)),
                    int64_t(count)};
  }
  void commit_inputs() override {
    rgb8_to_float_cpu(rgb8_target_);
    rgb8_target_ = {};
  }
  void wait_inputs_read() override {}  // commit_inputs() read them

  void read(Ref tensor, void* host, size_t count) override {
    const Elem e = graph().tensors.at(tensor.id).elem;
    std::memcpy(host, resolve(graph(), memory_, tensor), count * elem_bytes(e, 4));
  }

  void begin_readback(Ref tensor, size_t bytes) override {
    if (readbacks_pending_ == 2) fail("cpu backend: a third readback began before the first finished");
    std::vector<uint8_t>& slot = readback_[(readback_next_ + readbacks_pending_) % 2];
    slot.resize(bytes);
    read(tensor, slot.data(), bytes);
    ++readbacks_pending_;
  }
  const uint8_t* finish_readback() override {
    if (readbacks_pending_ == 0) fail("cpu backend: no readback pending");
    const uint8_t* bytes = readback_[readback_next_].data();
    readback_next_ = (readback_next_ + 1) % 2;
    --readbacks_pending_;
    return bytes;
  }

  size_t arena_bytes() const override { return arena_bytes_; }
  size_t weight_bytes() const override { return weight_bytes_; }
  size_t workspace_bytes() const override { return scratch_bytes_; }
  MemoryAvailable memory_available() const override { return host_memory_available(); }

 private:
  Graph& graph() {
    if (!graph_) fail("cpu backend: no graph prepared");
    return *graph_;
  }

  // A cancellable list (the frame) throws Cancelled when cancellation is requested (backends/cancel.h):
  // before its next op, or out of a long kernel that stopped partway (cpu_cancel.h). Nothing that
  // outlives the frame has been written then: only its last op, denoise_blend (which never stops
  // partway), writes the blend history and the RGBA8 image; the engine's next step renders the frame
  // again. Setup is not cancellable: a half-run setup would leave the plan's constants wrong.
  // Ops [begin, end) (all by default), but those that are off (Op::off).
  static void run(std::vector<Op>& ops, std::vector<float>* op_ms, bool cancellable, size_t begin = 0,
                  size_t end = SIZE_MAX) {
    const cpu::CancelScope cancel(cancellable ? &cancel_requested : nullptr);
    for (size_t i = begin; i < std::min(end, ops.size()); ++i) {
      Op& op = ops[i];
      if (op.off) continue;  // its time stays 0
      if (cancellable) throw_if_cancelled();
      const auto start = std::chrono::steady_clock::now();
      std::visit(Overloaded{
                     [](ConvOp& o) { conv2d_cpu(o.p); },
                     [](GroupNormOp& o) { group_norm_cpu(o.p); },
                     [](LayerNormOp& o) { layer_norm_cpu(o.p); },
                     [](LinearOp& o) { linear_cpu(o.p); },
                     [](AttentionOp& o) { attention_cpu(o.p); },
                     [](GegluOp& o) { geglu_cpu(o.p); },
                     [](SiluOp& o) { silu_cpu(o.p); },
                     [](Upsample2xOp& o) { upsample2x_cpu(o.p); },
                     [](ConcatOp& o) { concat_cpu(o.p); },
                     [](TimestepEmbeddingOp& o) { timestep_embedding_cpu(o.p); },
                     [](EmbeddingOp& o) { embedding_cpu(o.p); },
                     [](FilmOp& o) { film_cpu(o.p); },
                     [](CastOp& o) { cast_cpu(o.p); },
                     [](GuidanceStepOp& o) { guidance_step_cpu(o.p); },
                     [](DenoiseBlendOp& o) { denoise_blend_cpu(o.p); },
                     [](ScaleActivationOp& o) { scale_activation_cpu(o.p); },
                     [](SimilarityOp& o) { similarity_cpu(o.p); },
                     [](CannyOp& o) { canny_cpu(o.p); },
                 },
                 op.body);
      if (cancel.stopped()) throw Cancelled("cancelled");
      if (op_ms) (*op_ms)[i] = std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  }

  CpuThreads threads_;
  bool profiling_ = false;
  std::vector<float> op_ms_;  // of the last frame, until frame_op_ms() takes them
  float frame_ms_ = 0;
  Graph* graph_ = nullptr;
  ArenaPlan plan_;
  BackendMemory memory_;
  HostBuffer arena_, weights_, scratch_;
  size_t arena_bytes_ = 0, weight_bytes_ = 0, scratch_bytes_ = 0;
  std::vector<uint8_t> rgb8_input_;  // an 8-bit source image until commit_inputs() converts it
  Rgb8ToFloatParams rgb8_target_;
  std::vector<uint8_t> readback_[2];
  int readback_next_ = 0, readbacks_pending_ = 0;  // the oldest pending slot, and how many are pending
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace rtvd
