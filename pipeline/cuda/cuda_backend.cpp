#include "cuda_backend.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
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
#if RTVD_HAS_CUDNN
#include "kernels/conv2d_cudnn.cuh"
#endif
#include "pipeline/bind.h"
#include "pipeline/half.h"
#include "pipeline/planner.h"

namespace rtvd {

namespace {

constexpr size_t kLibraryWorkspace = size_t(32) << 20;  // cuBLASLt / cuDNN scratch

// Owns device memory; move-only.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(size_t bytes, const char* what) : bytes_(bytes) {
    size_t free_bytes = 0, total = 0;
    RTVD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    if (bytes > free_bytes)
      fail("out of GPU memory allocating ", what, ": needs ", bytes, " bytes, ", free_bytes, " free of ", total);
    RTVD_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes, 256)));
  }
  DeviceMemory(DeviceMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceMemory() {
    if (ptr_) cudaFree(ptr_);  // destructor: nothing to report to
  }
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

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
  }

  ~CudaBackend() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    destroy_events();
#if RTVD_HAS_CUDNN
    cudnn_plans_.clear();
    if (cudnn_) cudnnDestroy(cudnn_);
#endif
    cublasLtDestroy(ctx_.cublaslt);
    cudaStreamDestroy(ctx_.stream);
  }

  std::string describe() const override {
    return cat("cuda: ", gpu_.name, " (sm_", gpu_.sm, "), fp16, ", kernels_ == "cudnn" ? "cuDNN convolutions" : "custom kernels",
               ", one CUDA graph per frame");
  }
  bool is_cuda() const override { return true; }
  size_t act_bytes() const override { return 2; }

  void upload_weights(const WeightStore& store) override {
    const auto& ws = store.tensors();
    size_t total = 0;
    for (const auto& w : ws) total += aligned(w.data.size() * elem_bytes(w.elem, 2));
    if (ws.size() == uploaded_count_ && total == weights_.bytes()) return;  // unchanged since the last plan
    std::vector<uint8_t> host(total);
    memory_.weights.clear();
    memory_.weight_elems.clear();
    DeviceMemory device(total, "weights");
    size_t offset = 0;
    for (const auto& w : ws) {
      if (w.elem == Elem::Act) {
        auto* h = reinterpret_cast<uint16_t*>(host.data() + offset);
        for (size_t i = 0; i < w.data.size(); ++i) h[i] = float_to_half(w.data[i]);
      } else {
        std::memcpy(host.data() + offset, w.data.data(), w.data.size() * 4);
      }
      memory_.weights.push_back(device.get() + offset);
      memory_.weight_elems.push_back(w.elem);
      offset += aligned(w.data.size() * elem_bytes(w.elem, 2));
    }
    RTVD_CUDA_CHECK(cudaMemcpy(device.get(), host.data(), total, cudaMemcpyHostToDevice));
    weights_ = std::move(device);
    uploaded_count_ = ws.size();
  }

  void prepare(Graph& graph) override {
    drop_graph();
    graph_ = &graph;
    plan_ = plan_arena(graph, 2);
    if (plan_.bytes > arena_.bytes()) {
      arena_ = DeviceMemory();
      arena_ = DeviceMemory(plan_.bytes, "activations");
    }
    memory_.arena = arena_.get();
    memory_.plan = &plan_;
    memory_.act_bytes = 2;
    bind_ops(graph, graph.setup, memory_);
    bind_ops(graph, graph.frame, memory_);
    size_t workspace = kLibraryWorkspace;
    for (auto* list : {&graph.setup, &graph.frame})
      for (Op& op : *list)
        if (auto* c = std::get_if<ConvOp>(&op.body)) {
          workspace = std::max(workspace, conv2d_workspace_bytes(c->p, conv2d_choose_config(c->p, ctx_)));
#if RTVD_HAS_CUDNN
          if (kernels_ == "cudnn") {
            cudnn_plans_.push_back(make_conv2d_cudnn_plan(c->p, cudnn_));
            workspace = std::max(workspace, cudnn_plans_.back().workspace_bytes);
          }
#endif
        }
    if (workspace > workspace_.bytes()) workspace_ = DeviceMemory(workspace, "workspace");
    ctx_.workspace = workspace_.get();
    ctx_.workspace_bytes = workspace_.bytes();
  }

  void run_setup() override {
    run(graph().setup);
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }

  // The first run of a plan is eager (libraries do their lazy set-up outside any capture); later runs
  // replay one CUDA graph of every frame op.
  void run_frame() override {
    if (!exec_ && eager_runs_ > 0) capture();
    if (exec_) {
      RTVD_CUDA_CHECK(cudaGraphLaunch(exec_, ctx_.stream));
    } else {
      run(graph().frame);
      ++eager_runs_;
    }
  }

  void ops_changed() override { drop_graph(); }

  // Events around every frame op, recorded into the captured graph as external event nodes (so they
  // keep their timestamps); read once the frame has completed, never waited for.
  void set_profiling(bool on) override {
    if (on == profiling_) return;
    drop_graph();
    destroy_events();
    profiling_ = on;
  }

  std::vector<float> frame_op_ms() override {
    if (events_.empty() || cudaEventQuery(events_.back()) != cudaSuccess) return last_op_ms_;
    last_op_ms_.resize(events_.size() - 1);
    for (size_t i = 0; i + 1 < events_.size(); ++i)
      RTVD_CUDA_CHECK(cudaEventElapsedTime(&last_op_ms_[i], events_[i], events_[i + 1]));
    return last_op_ms_;
  }

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

  void write(Ref tensor, const void* host, size_t count) override {
    const Elem e = graph().tensors.at(tensor.id).elem;
    void* dst = resolve(graph(), memory_, tensor);
    if (e == Elem::Act) {
      staging_.resize(count * 2);
      auto* h = reinterpret_cast<uint16_t*>(staging_.data());
      const float* f = static_cast<const float*>(host);
      for (size_t i = 0; i < count; ++i) h[i] = float_to_half(f[i]);
      RTVD_CUDA_CHECK(cudaMemcpyAsync(dst, staging_.data(), count * 2, cudaMemcpyHostToDevice, ctx_.stream));
    } else {
      RTVD_CUDA_CHECK(cudaMemcpyAsync(dst, host, count * elem_bytes(e, 2), cudaMemcpyHostToDevice, ctx_.stream));
    }
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // host buffer may be reused right after
  }

  void read(Ref tensor, void* host, size_t count) override {
    const Elem e = graph().tensors.at(tensor.id).elem;
    const void* src = resolve(graph(), memory_, tensor);
    if (e == Elem::Act) {
      staging_.resize(count * 2);
      RTVD_CUDA_CHECK(cudaMemcpyAsync(staging_.data(), src, count * 2, cudaMemcpyDeviceToHost, ctx_.stream));
      RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
      const auto* h = reinterpret_cast<const uint16_t*>(staging_.data());
      float* f = static_cast<float*>(host);
      for (size_t i = 0; i < count; ++i) f[i] = half_to_float(h[i]);
    } else {
      RTVD_CUDA_CHECK(cudaMemcpyAsync(host, src, count * elem_bytes(e, 2), cudaMemcpyDeviceToHost, ctx_.stream));
      RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    }
  }

  DeviceView device_view(Ref tensor) override { return {resolve(graph(), memory_, tensor), ctx_.stream}; }

  size_t arena_bytes() const override { return arena_.bytes(); }
  size_t weight_bytes() const override { return weights_.bytes(); }

 private:
  Graph& graph() {
    if (!graph_) fail("cuda backend: no graph prepared");
    return *graph_;
  }

  template <class F>
  double median_ms(F&& f) {
    cudaEvent_t start, stop;
    RTVD_CUDA_CHECK(cudaEventCreate(&start));
    RTVD_CUDA_CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < 3; ++i) f();  // warm-up
    std::vector<float> ms(15);
    for (float& m : ms) {
      RTVD_CUDA_CHECK(cudaEventRecord(start, ctx_.stream));
      f();
      RTVD_CUDA_CHECK(cudaEventRecord(stop, ctx_.stream));
      RTVD_CUDA_CHECK(cudaEventSynchronize(stop));
      RTVD_CUDA_CHECK(cudaEventElapsedTime(&m, start, stop));
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  void fill_random_half(const DeviceMemory& m) {
    std::vector<uint16_t> h(m.bytes() / 2);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (auto& v : h) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = float_to_half(float(int(state >> 40) % 2001 - 1000) / 1000.0f);
    }
    RTVD_CUDA_CHECK(cudaMemcpy(m.get(), h.data(), m.bytes(), cudaMemcpyHostToDevice));
  }

  void destroy_events() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.clear();
    last_op_ms_.clear();
  }

  void drop_graph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    eager_runs_ = 0;
  }

  void capture() {
    cudaGraph_t g = nullptr;
    RTVD_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    try {
      run(graph().frame);
      capturing_ = false;
    } catch (...) {
      capturing_ = false;
      cudaStreamEndCapture(ctx_.stream, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    RTVD_CUDA_CHECK(cudaStreamEndCapture(ctx_.stream, &g));
    const cudaError_t e = cudaGraphInstantiate(&exec_, g, 0);
    cudaGraphDestroy(g);
    RTVD_CUDA_CHECK(e);
  }

  void run(std::vector<Op>& ops) {
    const CudaContext& c = ctx_;
    const bool timed = profiling_ && &ops == &graph().frame;
    if (timed && events_.size() != ops.size() + 1) {
      destroy_events();
      events_.resize(ops.size() + 1);
      for (cudaEvent_t& e : events_) RTVD_CUDA_CHECK(cudaEventCreate(&e));
    }
    // Under capture the records must become event nodes of the graph (External); eager runs record plainly.
    const unsigned event_flags = capturing_ ? cudaEventRecordExternal : cudaEventRecordDefault;
    size_t conv_index = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      Op& op = ops[i];
      if (timed) RTVD_CUDA_CHECK(cudaEventRecordWithFlags(events_[i], c.stream, event_flags));
      std::visit(Overloaded{
                     [&](ConvOp& o) {
#if RTVD_HAS_CUDNN
                       if (kernels_ == "cudnn" && &ops == &graph().frame) {
                         conv2d_cudnn(o.p, cudnn_plans_.at(setup_conv_count() + conv_index++), c);
                         return;
                       }
#endif
                       conv2d(o.p, c);
                     },
                     [&](GroupNormOp& o) { group_norm(o.p, c); },
                     [&](LayerNormOp& o) { layer_norm(o.p, c); },
                     [&](LinearOp& o) { linear(o.p, c); },
                     [&](AttentionOp& o) { attention(o.p, c); },
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
    if (timed) RTVD_CUDA_CHECK(cudaEventRecordWithFlags(events_.back(), c.stream, event_flags));
  }

  size_t setup_conv_count() {
    size_t n = 0;
    for (Op& op : graph().setup) n += std::holds_alternative<ConvOp>(op.body);
    return n;
  }

  GpuInfo gpu_;
  std::string kernels_;
  CudaContext ctx_;
  Graph* graph_ = nullptr;
  ArenaPlan plan_;
  BackendMemory memory_;
  DeviceMemory arena_, weights_, workspace_;
  size_t uploaded_count_ = 0;
  std::vector<uint8_t> staging_;
  cudaGraphExec_t exec_ = nullptr;
  int eager_runs_ = 0;
  bool profiling_ = false, capturing_ = false;
  std::vector<cudaEvent_t> events_;  // before each frame op, and after the last
  std::vector<float> last_op_ms_;
#if RTVD_HAS_CUDNN
  cudnnHandle_t cudnn_ = nullptr;
  std::vector<Conv2dCudnnPlan> cudnn_plans_;
#endif
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const GpuInfo& gpu, const std::string& kernels) {
  return std::make_unique<CudaBackend>(gpu, kernels);
}

}  // namespace rtvd
