#include "cuda_backend.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "kernels/attention.cuh"
#include "kernels/cast.cuh"
#include "kernels/conv2d.cuh"
#include "kernels/cuda_context.cuh"
#include "kernels/denoise.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/embedding.cuh"
#include "kernels/group_norm.cuh"
#include "kernels/layer_norm.cuh"
#include "kernels/linear.cuh"
#include "kernels/nvtx_range.h"
#if RTVD_HAS_CUDNN
#include "kernels/attention_cudnn.cuh"
#include "kernels/conv2d_cudnn.cuh"
#endif
#include "pipeline/bind.h"
#include "pipeline/cuda/conv_tuner.h"
#include "pipeline/cuda/cuda_graph.h"
#include "pipeline/cuda/cuda_memory.h"
#include "pipeline/cuda/frame_timer.h"
#include "pipeline/cuda/layer_tuner.h"
#include "pipeline/half.h"
#include "pipeline/planner.h"

namespace rtvd {

namespace {

constexpr size_t kLibraryWorkspace = size_t(32) << 20;  // cuBLASLt / cuDNN scratch
constexpr const char* kCudnnAttention = "cuDNN SDPA";

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte (null: nothing).
bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return x && y && x < y + b_bytes && y < x + a_bytes;
}

// The GEMM of a linear layer (pointers ignored).
std::string linear_shape_key(const LinearParams& p) {
  return cat("linear ", p.m, "x", p.k, " -> ", p.n, p.bias ? " bias" : "", p.residual ? " res" : "",
             p.act == Activation::Silu ? " silu" : "");
}

// The shape of an attention layer that decides which implementation is fastest (pointers ignored).
std::string attention_shape_key(const AttentionParams& p) {
  return cat("attention ", p.batch, "x", p.heads, "x", p.head_dim, " q", p.q_len, " kv", p.kv_len, " strides ",
             p.q_stride, "/", p.k_stride, "/", p.v_stride, "/", p.o_stride);
}

// fp16 elements from the first to the last one an op with this token count and stride may touch.
size_t token_span(int tokens, int stride, int width) { return size_t(tokens - 1) * stride + width; }

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

size_t aligned(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

class CudaBackend final : public Backend {
 public:
  CudaBackend(const GpuInfo& gpu, const std::string& kernels) : gpu_(gpu), kernels_(kernels) {
    RTVD_CUDA_CHECK(cudaSetDevice(gpu.index));
    RTVD_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
    RTVD_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&frame_queued_, cudaEventDisableTiming));
    RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&copied_out_, cudaEventDisableTiming));
    for (cudaEvent_t& e : readback_done_) RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    RTVD_CUBLAS_CHECK(cublasLtCreate(&ctx_.cublaslt));
#if RTVD_HAS_CUDNN
    if (cudnnCreate(&cudnn_) != CUDNN_STATUS_SUCCESS) fail("cudnnCreate failed");
#else
    if (kernels == "cudnn") fail("--kernels cudnn: this build has no cuDNN");
#endif
    ctx_.sm_version = gpu.sm;
    cudaDeviceProp p{};
    RTVD_CUDA_CHECK(cudaGetDeviceProperties(&p, gpu.index));
    ctx_.sm_count = p.multiProcessorCount;
    grid_sync_ = DeviceMemory(sizeof(unsigned), "grid sync word");
    RTVD_CUDA_CHECK(cudaMemset(grid_sync_.get(), 0, grid_sync_.bytes()));
    ctx_.grid_sync = reinterpret_cast<unsigned*>(grid_sync_.get());
    if (kernels == "auto") tuner_ = std::make_unique<LayerTuner>(default_tuning_cache_path(), device_key());
  }

  ~CudaBackend() override {
    cudaStreamSynchronize(ctx_.stream);  // copies from pinned staging may be in flight
    drop_graph();
#if RTVD_HAS_CUDNN
    cudnn_plans_.clear();
    attention_plans_.clear();
    if (cudnn_) cudnnDestroy(cudnn_);
#endif
    cublasLtDestroy(ctx_.cublaslt);
    cudaStreamSynchronize(copy_stream_);
    for (auto& [id, s] : staging_) cudaEventDestroy(s.copied);
    for (cudaEvent_t e : readback_done_) cudaEventDestroy(e);
    cudaEventDestroy(frame_queued_);
    cudaEventDestroy(copied_out_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(ctx_.stream);
  }

  std::string describe() const override {
    const char* family = kernels_ == "cudnn" ? "cuDNN convolutions and attention"
                         : kernels_ == "auto"  ? "autotuned convolutions and attention"
                                               : "custom kernels";
    return cat("cuda: ", gpu_.name, " (sm_", gpu_.sm, "), fp16, ", family, ", one CUDA graph per frame");
  }
  bool is_cuda() const override { return true; }
  size_t act_bytes() const override { return 2; }

  // Through two pinned staging buffers: the host threads write (reorder, convert) weights into one while
  // the copy engine moves the other, so an fp16 checkpoint costs about one pass over its bytes.
  void upload_weights(const WeightStore& store) override {
    const auto& ws = store.tensors();
    size_t total = 0, largest = 0;
    for (const auto& w : ws) {
      const size_t bytes = aligned(size_t(w.numel()) * elem_bytes(w.elem, 2));
      total += bytes;
      largest = std::max(largest, bytes);
    }
    if (ws.size() == uploaded_count_ && total == weights_.bytes()) return;  // unchanged since the last plan
    memory_.weights.clear();
    memory_.weight_elems.clear();
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
      RTVD_CUDA_CHECK(cudaMemcpyAsync(device.get() + chunk_begin, staging[current].get(), used, cudaMemcpyHostToDevice, ctx_.stream));
      RTVD_CUDA_CHECK(cudaEventRecord(events.copied[current], ctx_.stream));
      current ^= 1;
      RTVD_CUDA_CHECK(cudaEventSynchronize(events.copied[current]));  // the other buffer's copy is done
      chunk_begin += used;
      used = 0;
    };
    for (const auto& w : ws) {
      const size_t bytes = aligned(size_t(w.numel()) * elem_bytes(w.elem, 2));
      if (used + bytes > chunk) send();
      w.write(staging[current].get() + used, DType::F16);
      memory_.weights.push_back(device.get() + offset);
      memory_.weight_elems.push_back(w.elem);
      offset += bytes;
      used += bytes;
    }
    send();
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    weights_ = std::move(device);
    uploaded_count_ = ws.size();
  }

  void prepare(Graph& graph) override {
    drop_graph();
    RTVD_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));  // readbacks of the old plan's memory are done
    readback_tensor_ = -1;
    graph_ = &graph;
    plan_ = plan_arena(graph, 2);
    if (plan_.bytes > arena_.bytes()) {
      arena_ = DeviceMemory();
      arena_ = DeviceMemory(plan_.bytes, "activations");
      // Poisoned: all-ones bytes are NaN in fp16 and fp32, so a read of an element no op wrote shows as
      // NaN in the output, which every GPU test rejects. (compute-sanitizer's initcheck cannot see the TMA
      // stores of cuBLASLt's sm_90 kernels and would report reads of their outputs otherwise.)
      RTVD_CUDA_CHECK(cudaMemsetAsync(arena_.get(), 0xFF, arena_.bytes(), ctx_.stream));
    }
    memory_.arena = arena_.get();
    memory_.plan = &plan_;
    memory_.act_bytes = 2;
    bind_ops(graph, graph.setup, memory_);
    bind_ops(graph, graph.frame, memory_);
    // conv2d_choose_config() splits K only as far as the workspace allows: size it before choosing.
    size_t workspace = with_workspace(kLibraryWorkspace).workspace_bytes;
    for (const Op& op : graph.setup)
      if (auto* c = std::get_if<ConvOp>(&op.body))
        workspace = std::max(workspace, conv2d_workspace_bytes(c->p, conv2d_choose_config(c->p, ctx_)));
    find_fusable_norms(graph.frame);
    frames_since_prepare_ = 0;
    frame_convs_.assign(graph.frame.size(), FrameConv{});
    frame_attentions_.assign(graph.frame.size(), FrameAttention{});
    frame_linears_.assign(graph.frame.size(), FrameLinear{});
    for (size_t i = 0; i < graph.frame.size(); ++i) {
      if (auto* c = std::get_if<ConvOp>(&graph.frame[i].body)) {
        FrameConv& f = frame_convs_[i];
        if (kernels_ == "cudnn") f.choice.cudnn = true;
        else if (kernels_ == "custom") f.choice = default_custom_conv(c->p, ctx_);
        else if (const TunedChoice* cached = tuner_->cached(conv_shape_key(c->p))) f.choice = conv_choice_named(cached->impl);
        else continue;  // tuned at the first (eager) run of the frame
        f.decided = true;
        workspace = std::max(workspace, conv_workspace_bytes(c->p, f));
      }
      if (auto* l = std::get_if<LinearOp>(&graph.frame[i].body)) {
        // custom and cudnn keep cuBLASLt's first choice, so their frames are the same bit for bit.
        const TunedChoice* cached = tuner_ ? tuner_->cached(linear_shape_key(l->p)) : nullptr;
        frame_linears_[i].decided = !tuner_ || cached;  // else timed at the second frame
        if (cached) frame_linears_[i].algorithm = cached->impl;
      }
      if (auto* a = std::get_if<AttentionOp>(&graph.frame[i].body)) {
        FrameAttention& f = frame_attentions_[i];
        f.decided = true;
        if (kernels_ == "cudnn") {
          f.cudnn = cudnn_attention_plan(a->p) != nullptr;  // else ours: no engine for it
          workspace = std::max(workspace, attention_workspace_bytes(a->p, f));
        } else if (kernels_ == "auto" && cudnn_attention_may_win(a->p)) {
          const TunedChoice* cached = tuner_->cached(attention_shape_key(a->p));
          f.decided = cached != nullptr;  // else tuned at the second frame
          f.cudnn = cached && cached->impl == kCudnnAttention;  // its plan is made at the second frame
        }
      }
    }
    with_workspace(workspace);
  }

  void run_setup() override {
    run(graph().setup, false);
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }

  // The first run of a plan is eager (libraries do their lazy set-up outside any capture; with `auto` the
  // convs are tuned); later runs replay one CUDA graph of every frame op. With `auto` one more run after
  // the first output is eager too: it times the linears' cuBLASLt algorithms and the attention layers'
  // implementations (~0.5 s for the SD U-Net, and ~1 s more the first time cuDNN compiles its attention
  // kernels on a machine; kept off the time to first output).
  void run_frame() override {
    ++frames_since_prepare_;
    const bool second_auto_frame = tuner_ && frames_since_prepare_ == 2;
    if (!exec_ && eager_runs_ > 0 && !second_auto_frame) capture();
    if (exec_) {
      const bool op_timed = profiling_ && timer_.want_op_times();
      if (profiling_) timer_.frame_begin(ctx_.stream, op_timed);
      RTVD_CUDA_CHECK(cudaGraphLaunch(op_timed ? exec_op_timed_ : exec_, ctx_.stream));
      if (profiling_) timer_.frame_end(ctx_.stream);
    } else {
      const auto undecided = [](const auto& choices) {
        return std::any_of(choices.begin(), choices.end(), [](const auto& f) { return !f.decided; });
      };
      const bool tuning = tuner_ && (undecided(frame_convs_) || undecided(frame_attentions_) || undecided(frame_linears_));
      run(graph().frame, false);
      ++eager_runs_;
      if (tuning) {
        tuner_->save();
        shrink_workspace();
      }
    }
  }

  std::string frame_op_impl(size_t i) const override {
    if (!graph_ || i >= graph_->frame.size()) return "";
    const OpBody& body = graph_->frame[i].body;
    if (std::holds_alternative<ConvOp>(body))
      return frame_convs_[i].decided ? frame_convs_[i].choice.describe() : "autotuned at the first frame";
    if (std::holds_alternative<LinearOp>(body)) {
      const FrameLinear& f = frame_linears_[i];
      return !f.decided ? "cuBLASLt, algorithms timed at the second frame"
             : f.algorithm.empty() ? "cuBLASLt" : "cuBLASLt, timed algorithm";
    }
    if (norm_fused(i)) return cat("in ", graph_->frame[norm_reader_[i]].layer, "'s pre-pass");
    if (auto* a = std::get_if<AttentionOp>(&body)) {
      const FrameAttention& f = frame_attentions_[i];
      if (!f.decided) return "autotuned at the second frame";
      if (f.cudnn) return kCudnnAttention;
      return custom_attention_name(a->p) + (kernels_ == "cudnn" ? " (cuDNN has no engine for it)" : "");
    }
    return "custom";
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

  Ceilings measure_ceilings() override {
    Ceilings c;
    const int n = 8192;
    const size_t matrix = size_t(n) * n * 2;
    DeviceMemory a(matrix, "ceiling GEMM"), b(matrix, "ceiling GEMM"), y(matrix, "ceiling GEMM");
    fill_random_half(a), fill_random_half(b);  // random data: zeros run faster than real inputs
    LinearParams p;
    p.x = a.get();
    p.w = b.get();
    p.y = y.get();
    p.m = p.n = p.k = n;
    // cuBLASLt's first choice, as every earlier ceiling was measured.
    c.gemm_tflops = 2.0 * n * n * double(n) / median_ms([&] { linear(p, ctx_); }) / 1e9;
    c.gemm_what = cat("fp16 GEMM ", n, "^3 through cuBLASLt, fp32 accumulation");
    const size_t bytes = size_t(1) << 30;
    DeviceMemory src(bytes, "ceiling copy"), dst(bytes, "ceiling copy");
    RTVD_CUDA_CHECK(cudaMemsetAsync(src.get(), 1, bytes, ctx_.stream));
    c.copy_gbps = 2.0 * bytes / median_ms([&] {
      RTVD_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, ctx_.stream));
    }) / 1e6;
    c.copy_what = "device-to-device copy of 1 GiB, read + write";
    return c;
  }

  // Converts into the tensor's own pinned staging buffer and copies from there asynchronously: the
  // host never waits for the frames in flight, only (rarely) for this buffer's previous copy.
  void write(Ref tensor, const void* host, size_t count) override {
    const Elem e = graph().tensors.at(tensor.id).elem;
    const size_t bytes = count * elem_bytes(e, 2);
    Staging& st = staging_[tensor.id];
    if (!st.copied) RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&st.copied, cudaEventDisableTiming));
    RTVD_CUDA_CHECK(cudaEventSynchronize(st.copied));  // the previous copy from this buffer has read it
    if (st.memory.bytes() < bytes) st.memory = PinnedMemory(bytes);
    if (e == Elem::Act) {
      auto* h = reinterpret_cast<uint16_t*>(st.memory.get());
      const float* f = static_cast<const float*>(host);
      for (size_t i = 0; i < count; ++i) h[i] = float_to_half(f[i]);
    } else {
      std::memcpy(st.memory.get(), host, bytes);
    }
    RTVD_CUDA_CHECK(cudaMemcpyAsync(resolve(graph(), memory_, tensor), st.memory.get(), bytes, cudaMemcpyHostToDevice, ctx_.stream));
    RTVD_CUDA_CHECK(cudaEventRecord(st.copied, ctx_.stream));
  }

  void read(Ref tensor, void* host, size_t count) override {
    const Elem e = graph().tensors.at(tensor.id).elem;
    const void* src = resolve(graph(), memory_, tensor);
    if (e == Elem::Act) {
      read_half_.resize(count);
      RTVD_CUDA_CHECK(cudaMemcpyAsync(read_half_.data(), src, count * 2, cudaMemcpyDeviceToHost, ctx_.stream));
      RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
      const uint16_t* h = read_half_.data();
      float* f = static_cast<float*>(host);
      for (size_t i = 0; i < count; ++i) f[i] = half_to_float(h[i]);
    } else {
      RTVD_CUDA_CHECK(cudaMemcpyAsync(host, src, count * elem_bytes(e, 2), cudaMemcpyDeviceToHost, ctx_.stream));
      RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    }
  }

  void begin_readback(Ref tensor, size_t bytes) override {
    if (readbacks_pending_ == 2) fail("cuda backend: a third readback began before the first finished");
    if (readback_tensor_ != tensor.id) {  // the graph must wait for this tensor's copies before writing it
      readback_tensor_ = tensor.id;
      drop_graph();
    }
    const int slot = (readback_next_ + readbacks_pending_) % 2;
    if (readback_[slot].bytes() < bytes) readback_[slot] = PinnedMemory(bytes);
    RTVD_CUDA_CHECK(cudaEventRecord(frame_queued_, ctx_.stream));
    RTVD_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, frame_queued_, 0));
    RTVD_CUDA_CHECK(cudaMemcpyAsync(readback_[slot].get(), resolve(graph(), memory_, tensor), bytes, cudaMemcpyDeviceToHost, copy_stream_));
    RTVD_CUDA_CHECK(cudaEventRecord(readback_done_[slot], copy_stream_));
    RTVD_CUDA_CHECK(cudaEventRecord(copied_out_, copy_stream_));
    ++readbacks_pending_;
  }

  const uint8_t* finish_readback() override {
    if (readbacks_pending_ == 0) fail("cuda backend: no readback pending");
    const int slot = readback_next_;
    RTVD_CUDA_CHECK(cudaEventSynchronize(readback_done_[slot]));
    readback_next_ = (readback_next_ + 1) % 2;
    --readbacks_pending_;
    return readback_[slot].get();
  }

  DeviceView device_view(Ref tensor) override { return {resolve(graph(), memory_, tensor), ctx_.stream}; }

  size_t arena_bytes() const override { return arena_.bytes(); }
  size_t weight_bytes() const override { return weights_.bytes(); }

 private:
  Graph& graph() {
    if (!graph_) fail("cuda backend: no graph prepared");
    return *graph_;
  }

  double median_ms(const std::function<void()>& f) { return cuda_median_ms(ctx_.stream, 3, 15, f); }

  void fill_random_half(const DeviceMemory& m) {
    std::vector<uint16_t> h(m.bytes() / 2);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (auto& v : h) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = float_to_half(float(int(state >> 40) % 2001 - 1000) / 1000.0f);
    }
    RTVD_CUDA_CHECK(cudaMemcpy(m.get(), h.data(), m.bytes(), cudaMemcpyHostToDevice));
  }

  void drop_graph() {
    for (cudaGraphExec_t* e : {&exec_, &exec_op_timed_}) {
      if (*e) cudaGraphExecDestroy(*e);
      *e = nullptr;
    }
    eager_runs_ = 0;
  }

  // The frame as a graph; with profiling also a second one with an event between every two ops.
  void capture() {
    if (profiling_) {
      timer_.reset(graph().frame.size());
      exec_op_timed_ = capture_frame(true);
    }
    exec_ = capture_frame(false);
  }

  cudaGraphExec_t capture_frame(bool op_timed) {
    capturing_ = true;
    try {
      const cudaGraphExec_t exec = capture_graph(ctx_.stream, [&] { run(graph().frame, op_timed); });
      capturing_ = false;
      return exec;
    } catch (...) {
      capturing_ = false;
      throw;
    }
  }

  // Queues ops on the stream. op_timed (frame ops under capture): an event node before every op and
  // after the last, External so that the nodes keep their timestamps.
  void run(std::vector<Op>& ops, bool op_timed) {
    const CudaContext& c = ctx_;
    const bool frame = &ops == &graph().frame;
    for (size_t i = 0; i < ops.size(); ++i) {
      Op& op = ops[i];
      const NvtxRange layer(op.layer.c_str());  // under capture, Nsight Systems projects it onto the graph's nodes
      if (op_timed) RTVD_CUDA_CHECK(cudaEventRecordWithFlags(timer_.op_event(i), c.stream, cudaEventRecordExternal));
      if (frame && touches(op, readback_tensor_))  // the last readback of this tensor must have read it
        RTVD_CUDA_CHECK(cudaStreamWaitEvent(c.stream, copied_out_, capturing_ ? cudaEventWaitExternal : 0));
      std::visit(Overloaded{
                     [&](ConvOp& o) {
                       if (frame) run_conv(frame_convs_[i], o.p, fused_norm_of(i));
                       else conv2d(o.p, c);
                     },
                     [&](GroupNormOp& o) {
                       if (!frame || !norm_fused(i)) group_norm(o.p, c);
                     },
                     [&](LayerNormOp& o) { layer_norm(o.p, c); },
                     [&](LinearOp& o) {
                       if (frame) run_linear(frame_linears_[i], o.p);
                       else linear(o.p, c);
                     },
                     [&](AttentionOp& o) {
                       if (frame) run_attention(frame_attentions_[i], o.p);
                       else attention(o.p, c);
                     },
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
                 },
                 op.body);
    }
    if (op_timed) RTVD_CUDA_CHECK(cudaEventRecordWithFlags(timer_.op_event(ops.size()), c.stream, cudaEventRecordExternal));
  }

  // How a frame conv runs: decided at prepare() (forced family or a cached choice) or by tuning at the
  // first eager run of the frame.
  struct FrameConv {
    bool decided = false;
    ConvChoice choice;
  };

  // Statistics-only GroupNorms read by exactly one later frame conv: when that conv takes its prologue as a
  // pre-pass (cuDNN, wgmma), the pre-pass computes the statistics in the launch that normalises (`norm`),
  // and the norm op is skipped.
  void find_fusable_norms(std::vector<Op>& frame) {
    norm_reader_.assign(frame.size(), -1);
    conv_norm_.assign(frame.size(), -1);
    for (size_t i = 0; i < frame.size(); ++i) {
      const auto* norm = std::get_if<GroupNormOp>(&frame[i].body);
      if (!norm || norm->y || norm->stats.kind != Ref::Tensor) continue;
      std::vector<size_t> readers;
      for (size_t j = 0; j < frame.size(); ++j)
        if (j != i && touches(frame[j], norm->stats.id)) readers.push_back(j);
      const auto* conv = readers.size() == 1 ? std::get_if<ConvOp>(&frame[readers[0]].body) : nullptr;
      if (conv && readers[0] > i && conv->gn_stats.kind == Ref::Tensor && conv->gn_stats.id == norm->stats.id &&
          conv->x.kind == norm->x.kind && conv->x.id == norm->x.id && conv->x.offset == norm->x.offset)
        norm_reader_[i] = int(readers[0]), conv_norm_[readers[0]] = int(i);
    }
  }

  // The norm whose statistics frame conv i computes itself, or null. Asked before the conv runs: one that
  // is tuned in this run was undecided when its norm came, so that norm ran and the conv reads its output.
  const GroupNormParams* fused_norm_of(size_t i) const {
    const int norm = conv_norm_[i];
    return norm >= 0 && norm_fused(size_t(norm)) ? &std::get<GroupNormOp>(graph_->frame[size_t(norm)].body).p : nullptr;
  }

  bool norm_fused(size_t i) const {
    const int reader = norm_reader_[i];
    if (reader < 0 || !frame_convs_[reader].decided) return false;
    return conv_takes_prepass(std::get<ConvOp>(graph_->frame[size_t(reader)].body).p, frame_convs_[reader].choice);
  }

  void run_conv(FrameConv& f, const Conv2dParams& p, const GroupNormParams* norm) {
    if (!f.decided) {
      if (capturing_) fail("conv autotune: ", conv_shape_key(p), " is not tuned before capture");
      const TunedChoice* cached = tuner_->cached(conv_shape_key(p));  // an earlier layer of the same shape
      f.choice = conv_choice_named(cached ? cached->impl : tune_conv(p));
      f.decided = true;
    }
    if (f.choice.cudnn) run_cudnn_conv(p, norm);
    else run_custom_conv(p, f.choice, ctx_, norm);
  }

  // The name of the fastest correct implementation of p (ConvChoice::describe()).
  std::string tune_conv(const Conv2dParams& p) {
    std::vector<LayerCandidate> candidates = custom_conv_candidates(p, ctx_);
    const size_t y_count = size_t(p.n) * p.h_out * p.w_out * p.c_out;
    // Re-running a layer that updates its input in place would change its result: keep the default.
    // (x and residual are at least as large as y when they overlap it.)
    if (overlaps(p.x, y_count * 2, p.y, y_count * 2) || overlaps(p.residual, y_count * 2, p.y, y_count * 2))
      return candidates[0].name;
#if RTVD_HAS_CUDNN
    candidates.push_back({ConvChoice{true, {}, {}}.describe(), cudnn_plan(p).workspace_bytes,
                          [this, p](const CudaContext&) { run_cudnn_conv(p); }});
#endif
    return tuner_->tune(conv_shape_key(p), {p.y, y_count}, candidates, workspace_fn()).impl;
  }

  // The first frame of a plan with --kernels auto: its linears and attention wait for the second.
  bool first_auto_frame() const { return tuner_ && frames_since_prepare_ == 1; }

  std::function<const CudaContext&(size_t)> workspace_fn() {
    return [this](size_t bytes) -> const CudaContext& { return with_workspace(bytes); };
  }

  // How a frame linear runs: cuBLASLt's first choice (algorithm empty) or the algorithm timing chose.
  struct FrameLinear {
    bool decided = false;
    std::string algorithm;
  };

  // With auto, the linears' algorithms are timed at the second frame, after the first output.
  void run_linear(FrameLinear& f, const LinearParams& p) {
    if (!f.decided && !first_auto_frame()) {
      if (capturing_) fail("linear autotune: ", linear_shape_key(p), " is not tuned before capture");
      const TunedChoice* cached = tuner_->cached(linear_shape_key(p));  // an earlier layer of the same shape
      f.algorithm = cached ? cached->impl : tune_linear(p);
      f.decided = true;
    }
    linear(p, ctx_, f.algorithm);
  }

  // The fastest correct of cuBLASLt's ranked algorithms for p's GEMM on its real operands, or "" (its
  // first choice) when there is nothing to choose or p can't be run twice.
  std::string tune_linear(const LinearParams& p) {
    const std::vector<std::string> algorithms = linear_algorithms(p, ctx_);
    const size_t y_bytes = size_t(p.m) * p.n * 2;
    // A GEMM that writes over its inputs (a residual added in place) would change its result when re-run.
    if (algorithms.size() < 2 || overlaps(p.y, y_bytes, p.x, size_t(p.m) * p.k * 2) ||
        overlaps(p.y, y_bytes, p.residual, y_bytes))
      return "";
    std::vector<LayerCandidate> candidates;
    for (const std::string& a : algorithms) candidates.push_back({a, 0, [p, a](const CudaContext& c) { linear(p, c, a); }});
    return tuner_->tune(linear_shape_key(p), {p.y, y_bytes / 2}, candidates, workspace_fn()).impl;
  }

  // How a frame attention runs: ours, or cuDNN's fused attention; decided at prepare() (forced family or
  // a cached choice) or by tuning at the second frame.
  struct FrameAttention {
    bool decided = false, cudnn = false;
  };

  std::string custom_attention_name(const AttentionParams& p) const {
    return cat("custom ", attention_kernel_name(p, ctx_));
  }

  // Where cuDNN's fused attention was measured faster than ours (rtvd bench kernels, H100): long key
  // sequences. Over 77 context tokens or 64 keys ours wins, and a cuDNN plan costs 50-800 ms to make
  // (its kernels are compiled at run time), so those layers keep ours without timing.
  static bool cudnn_attention_may_win(const AttentionParams& p) { return p.kv_len >= 256; }

  // With auto, the first frame runs ours: cuDNN's plans and the timing wait for the second frame, as the
  // linears' timing does, so they don't delay the first output.
  void run_attention(FrameAttention& f, const AttentionParams& p) {
    if (first_auto_frame()) return attention(p, ctx_);
    if (!f.decided) {
      if (capturing_) fail("attention autotune: ", attention_shape_key(p), " is not tuned before capture");
      const TunedChoice* cached = tuner_->cached(attention_shape_key(p));  // an earlier layer of the same shape
      f.cudnn = (cached ? cached->impl : tune_attention(p)) == kCudnnAttention;
      f.decided = true;
    }
#if RTVD_HAS_CUDNN
    if (f.cudnn) {
      const AttentionCudnnPlan* plan = cudnn_attention_plan(p);
      f.cudnn = plan != nullptr;  // a cached choice cuDNN can no longer make runs ours
      if (plan) {
        if (!capturing_) with_workspace(plan->workspace_bytes);  // eager runs come first and grow it
        return attention_cudnn(p, *plan, ctx_);
      }
    }
#endif
    attention(p, ctx_);
  }

  // The name of the fastest correct implementation of p.
  std::string tune_attention(const AttentionParams& p) {
    std::vector<LayerCandidate> candidates = {{custom_attention_name(p), 0, [p](const CudaContext& c) { attention(p, c); }}};
    const size_t width = size_t(p.heads) * p.head_dim;
    const size_t o_bytes = token_span(p.batch * p.q_len, p.o_stride, width) * 2;
    // Attention that writes over its inputs can't be run twice: keep ours.
    if (overlaps(p.o, o_bytes, p.q, token_span(p.batch * p.q_len, p.q_stride, width) * 2) ||
        overlaps(p.o, o_bytes, p.k, token_span(p.batch * p.kv_len, p.k_stride, width) * 2) ||
        overlaps(p.o, o_bytes, p.v, token_span(p.batch * p.kv_len, p.v_stride, width) * 2))
      return candidates[0].name;
#if RTVD_HAS_CUDNN
    if (const AttentionCudnnPlan* plan = cudnn_attention_plan(p))
      candidates.push_back({kCudnnAttention, plan->workspace_bytes, [p, plan](const CudaContext& c) { attention_cudnn(p, *plan, c); }});
#endif
    if (candidates.size() == 1) return candidates[0].name;  // nothing to choose from
    return tuner_->tune(attention_shape_key(p), {p.o, o_bytes / 2}, candidates, workspace_fn()).impl;
  }

  size_t attention_workspace_bytes([[maybe_unused]] const AttentionParams& p, [[maybe_unused]] const FrameAttention& f) {
#if RTVD_HAS_CUDNN
    if (const AttentionCudnnPlan* plan = f.cudnn ? cudnn_attention_plan(p) : nullptr) return plan->workspace_bytes;
#endif
    return 0;
  }

  size_t conv_workspace_bytes(const Conv2dParams& p, const FrameConv& f) {
    if (!f.choice.cudnn) return custom_conv_workspace_bytes(p, f.choice);
#if RTVD_HAS_CUDNN
    return cudnn_plan(p).workspace_bytes;
#else
    fail("--kernels cudnn: this build has no cuDNN");
#endif
  }

  void run_cudnn_conv(const Conv2dParams& p, const GroupNormParams* norm = nullptr) {
#if RTVD_HAS_CUDNN
    conv2d_cudnn(p, cudnn_plan(p), ctx_, norm);
#else
    fail("conv2d: ", conv_shape_key(p), " chose cuDNN, which this build lacks");
#endif
  }

#if RTVD_HAS_CUDNN
  // One plan per layer shape, made at its first use (at load) and kept: map nodes never move.
  const Conv2dCudnnPlan& cudnn_plan(const Conv2dParams& p) {
    const std::string key = conv_shape_key(p);
    auto it = cudnn_plans_.find(key);
    if (it == cudnn_plans_.end()) it = cudnn_plans_.emplace(key, make_conv2d_cudnn_plan(p, cudnn_)).first;
    return it->second;
  }

  // Likewise for cuDNN's fused attention; null when cuDNN has no engine for the shape (remembered too).
  const AttentionCudnnPlan* cudnn_attention_plan(const AttentionParams& p) {
    const std::string key = cat(attention_shape_key(p), " scale ", p.scale);
    auto it = attention_plans_.find(key);
    if (it == attention_plans_.end()) {
      std::unique_ptr<AttentionCudnnPlan> plan;
      try {
        plan = std::make_unique<AttentionCudnnPlan>(make_attention_cudnn_plan(p, cudnn_));
      } catch (const Error&) {
        // No engine (or a shape cuDNN rejects): the layer runs ours, which frame_op_impl() says.
      }
      it = attention_plans_.emplace(key, std::move(plan)).first;
    }
    return it->second.get();
  }
#else
  const void* cudnn_attention_plan(const AttentionParams&) { return nullptr; }
#endif

  // Tuning grew the scratch for every candidate (split-K 8 at 64x64 takes ~80 MB); keep what the chosen
  // implementations need.
  void shrink_workspace() {
    size_t need = kLibraryWorkspace;
    for (const std::vector<Op>* list : {&graph().setup, &graph().frame})
      for (const Op& op : *list) {
        if (auto* c = std::get_if<ConvOp>(&op.body))
          need = std::max(need, list == &graph().setup ? conv2d_workspace_bytes(c->p, conv2d_choose_config(c->p, ctx_))
                                                       : conv_workspace_bytes(c->p, frame_convs_[&op - graph().frame.data()]));
        if (auto* a = std::get_if<AttentionOp>(&op.body); a && list == &graph().frame)
          need = std::max(need, attention_workspace_bytes(a->p, frame_attentions_[&op - graph().frame.data()]));
      }
    if (need >= workspace_.bytes()) return;
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    workspace_ = DeviceMemory();
    with_workspace(need);
    eager_runs_ = 0;  // cuBLASLt plans depend on the scratch size: made again eagerly, never under capture
  }

  // The context with a scratch of at least `bytes`, grown (after the stream's work that may use the old
  // one) when short. Called at load only.
  const CudaContext& with_workspace(size_t bytes) {
    if (bytes > workspace_.bytes()) {
      RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
      workspace_ = DeviceMemory();
      workspace_ = DeviceMemory(bytes, "workspace");
    }
    ctx_.workspace = workspace_.get();
    ctx_.workspace_bytes = workspace_.bytes();
    return ctx_;
  }

  std::string device_key() const {
    int driver = 0;
    RTVD_CUDA_CHECK(cudaDriverGetVersion(&driver));
#if RTVD_HAS_CUDNN
    const std::string cudnn = cat(" cudnn ", cudnnGetVersion());
#else
    const std::string cudnn;
#endif
    return cat(gpu_.name, " sm_", gpu_.sm, " driver ", driver, cudnn, " cublasLt ", cublasLtGetVersion());
  }

  GpuInfo gpu_;
  std::string kernels_;
  CudaContext ctx_;
  Graph* graph_ = nullptr;
  ArenaPlan plan_;
  BackendMemory memory_;
  DeviceMemory arena_, weights_, workspace_, grid_sync_;
  size_t uploaded_count_ = 0;
  struct Staging {
    PinnedMemory memory;
    cudaEvent_t copied = nullptr;  // recorded after the last copy out of memory
  };
  std::map<int, Staging> staging_;  // per written tensor id
  std::vector<uint16_t> read_half_;
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t frame_queued_ = nullptr, copied_out_ = nullptr, readback_done_[2] = {};
  PinnedMemory readback_[2];
  int readback_tensor_ = -1, readback_next_ = 0, readbacks_pending_ = 0;
  cudaGraphExec_t exec_ = nullptr, exec_op_timed_ = nullptr;
  int eager_runs_ = 0;
  int frames_since_prepare_ = 0;  // frames begun since prepare(), the one running included
  bool profiling_ = false, capturing_ = false;
  FrameTimer timer_;
  std::unique_ptr<LayerTuner> tuner_;   // --kernels auto only
  std::vector<FrameConv> frame_convs_;  // per frame op (used for convs)
  std::vector<FrameAttention> frame_attentions_;  // per frame op (used for attention)
  std::vector<FrameLinear> frame_linears_;        // per frame op (used for linears)
  std::vector<int> norm_reader_;        // per frame op (GroupNorms): the conv that may compute its statistics, or -1
  std::vector<int> conv_norm_;          // per frame op (convs): the GroupNorm that norm_reader_ gives it, or -1
#if RTVD_HAS_CUDNN
  cudnnHandle_t cudnn_ = nullptr;
  std::map<std::string, Conv2dCudnnPlan> cudnn_plans_;
  std::map<std::string, std::unique_ptr<AttentionCudnnPlan>> attention_plans_;  // null: no engine
#endif
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const GpuInfo& gpu, const std::string& kernels) {
  return std::make_unique<CudaBackend>(gpu, kernels);
}

}  // namespace rtvd
