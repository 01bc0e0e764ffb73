#include "pipeline/backends/cuda/cuda_host.h"

#include <cublasLt.h>

#include <vector>

#include "kernels/linear/linear.cuh"
#include "pipeline/backends/gpu.h"
#include "pipeline/model_files/half.h"
#if RTVD_HAS_CUDNN
#include <cudnn.h>
#endif

namespace rtvd {

CudaHost::CudaHost(int index, size_t initial_workspace) : index_(index) {
  RTVD_CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp p{};
  RTVD_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  name_ = p.name;
  ctx_.sm_version = p.major * 10 + p.minor;
  ctx_.sm_count = p.multiProcessorCount;
  RTVD_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
  RTVD_CUBLAS_CHECK(cublasLtCreate(&ctx_.cublaslt));
#if RTVD_HAS_CUDNN
  if (cudnnCreate(&ctx_.cudnn) != CUDNN_STATUS_SUCCESS) fail("cudnnCreate failed");
#endif
  ctx_.plans = &plans_;
  grid_sync_ = DeviceMemory(sizeof(unsigned), "grid sync word");
  RTVD_CUDA_CHECK(cudaMemset(grid_sync_.get(), 0, grid_sync_.bytes()));
  ctx_.grid_sync = grid_sync_.as<unsigned>();
  with_workspace(initial_workspace);
}

CudaHost::~CudaHost() {
  cudaStreamSynchronize(ctx_.stream);  // destructor: nothing to report to
  plans_.clear();                      // before the handle they were made with
#if RTVD_HAS_CUDNN
  if (ctx_.cudnn) cudnnDestroy(ctx_.cudnn);
#endif
  if (ctx_.cublaslt) cublasLtDestroy(ctx_.cublaslt);
  cudaStreamDestroy(ctx_.stream);
}

const CudaContext& CudaHost::with_workspace(size_t bytes) {
  if (bytes > workspace_.bytes()) resize_workspace(bytes);
  return ctx_;
}

void CudaHost::resize_workspace(size_t bytes) {
  RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  workspace_ = DeviceMemory();
  workspace_ = DeviceMemory(bytes, "workspace");
  ctx_.workspace = workspace_.get();
  ctx_.workspace_bytes = workspace_.bytes();
}

std::string CudaHost::device_key() const {
  int driver = 0;
  RTVD_CUDA_CHECK(cudaDriverGetVersion(&driver));
#if RTVD_HAS_CUDNN
  const std::string cudnn = cat(" cudnn ", cudnnGetVersion());
#else
  const std::string cudnn;
#endif
  return cat(name_, " sm_", ctx_.sm_version, " driver ", driver, cudnn, " cublasLt ", cublasLtGetVersion());
}

Ceilings CudaHost::measure_ceilings() {
  const auto median_ms = [&](const std::function<void()>& f) { return cuda_median_ms(ctx_.stream, 3, 15, f); };
  Ceilings c;
  const int n = 8192;
  const size_t matrix = size_t(n) * n * 2;
  DeviceMemory a(matrix, "ceiling GEMM"), b(matrix, "ceiling GEMM"), y(matrix, "ceiling GEMM");
  fill_random_half(a, ctx_.stream), fill_random_half(b, ctx_.stream);
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

void fill_random_half(const DeviceMemory& m, cudaStream_t stream) {
  std::vector<uint16_t> h(m.bytes() / 2);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (auto& v : h) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = float_to_half(float(int(state >> 40) % 2001 - 1000) / 1000.0f);
  }
  RTVD_CUDA_CHECK(cudaMemcpyAsync(m.get(), h.data(), m.bytes(), cudaMemcpyHostToDevice, stream));
  RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace rtvd
