#include "bench/bench_table.cuh"

#include <algorithm>
#include <cstdio>

namespace rtvd::bench {
namespace {

constexpr size_t kRotateBytes = size_t(160) << 20;  // > 3x the H100's 50 MB L2

__global__ void fill_half_kernel(__half* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    p[i] = __float2half(scale * float(int(z >> 40) % 2001 - 1000) / 1000.0f);
  }
}

__global__ void fill_float_kernel(float* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    p[i] = scale * float(int(z >> 40) % 2001 - 1000) / 1000.0f;
  }
}

// Keeps the GPU busy for ~200 us, so that the host has queued what follows before the GPU gets there (an op's
// entry point lists and checks its candidates on every call: tens of microseconds).
__global__ void hold_kernel() {
  const long long start = clock64();
  while (clock64() - start < 400000) __nanosleep(1000);
}

}  // namespace

void* Buffers::half_random(size_t n, float scale) {
  void* p = raw(n * 2);
  fill_half_kernel<<<1024, 256>>>(static_cast<__half*>(p), n, memory_.size() * 7919, scale);
  RTVD_CHECK_LAUNCH("fill");
  return p;
}

float* Buffers::float_random(size_t n, float scale) {
  auto* p = static_cast<float*>(raw(n * 4));
  fill_float_kernel<<<1024, 256>>>(p, n, memory_.size() * 7919, scale);
  RTVD_CHECK_LAUNCH("fill");
  return p;
}

void* Buffers::raw(size_t bytes) { return memory_.emplace_back(bytes, "benchmark inputs").get(); }

int copies_for(size_t bytes) { return int(std::clamp<size_t>(kRotateBytes / std::max<size_t>(bytes, 1), 1, 64)); }

Table::Table(CudaHost& host, int runs, std::string only, nlohmann::json& out)
    : host_(host), runs_(runs), only_(std::move(only)), out_(out) {
  ceilings_ = host.measure_ceilings();
  out_["ceilings"] = {{"gemm_tflops", ceilings_.gemm_tflops}, {"gemm", ceilings_.gemm_what},
                      {"copy_gbps", ceilings_.copy_gbps}, {"copy", ceilings_.copy_what}};
  out_["results"] = nlohmann::json::array();
  std::printf("ceilings: fp16 GEMM %.0f TFLOP/s, copy %.0f GB/s\n\n", ceilings_.gemm_tflops, ceilings_.copy_gbps);
  std::printf("%-18s %-30s %-34s %10s %12s %7s\n", "op", "case", "impl", "ms", "TFLOP/s|GB/s", "% peak");
}

double Table::median_ms(const CudaContext& ctx, const std::function<void(int)>& f) { return medians_ms(ctx, {f})[0]; }

std::vector<double> Table::medians_ms(const CudaContext& ctx, const std::vector<std::function<void(int)>>& fs) {
  cudaEvent_t a, b;
  RTVD_CUDA_CHECK(cudaEventCreate(&a));
  RTVD_CUDA_CHECK(cudaEventCreate(&b));
  for (const auto& f : fs)
    for (int i = 0; i < 5; ++i) f(i);
  std::vector<std::vector<float>> ms(fs.size(), std::vector<float>(runs_));
  for (int i = 0; i < runs_; ++i)
    for (size_t k = 0; k < fs.size(); ++k) {
      hold_kernel<<<1, 1, 0, ctx.stream>>>();
      RTVD_CHECK_LAUNCH("hold");
      RTVD_CUDA_CHECK(cudaEventRecord(a, ctx.stream));
      fs[k](i * int(fs.size()) + int(k));  // a copy of the inputs none of the last calls read: cold in L2
      RTVD_CUDA_CHECK(cudaEventRecord(b, ctx.stream));
      RTVD_CUDA_CHECK(cudaEventSynchronize(b));
      RTVD_CUDA_CHECK(cudaEventElapsedTime(&ms[k][i], a, b));
    }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::vector<double> medians;
  for (std::vector<float>& m : ms) {
    std::sort(m.begin(), m.end());
    medians.push_back(m[runs_ / 2]);
  }
  return medians;
}

void Table::row(const std::string& op, const std::string& name, const std::string& impl, double ms, double flops,
                double bytes) {
  const bool compute = flops > 0;
  const double rate = compute ? flops / ms / 1e9 : bytes / ms / 1e6;
  const double peak = 100.0 * rate / (compute ? ceilings_.gemm_tflops : ceilings_.copy_gbps);
  std::printf("%-18s %-30s %-34s %10.4f %12.1f %7.1f\n", op.c_str(), name.c_str(), impl.c_str(), ms, rate, peak);
  std::fflush(stdout);
  out_["results"].push_back({{"op", op}, {"case", name}, {"impl", impl}, {"ms", ms}, {compute ? "tflops" : "gbps", rate},
                             {"percent_of_peak", peak}, {"flops", flops}, {"bytes", bytes}});
}

void Table::refused(const std::string& op, const std::string& name, const std::string& impl, const std::string& why) {
  std::printf("%-18s %-30s %-34s %s\n", op.c_str(), name.c_str(), impl.c_str(), why.c_str());
  out_["results"].push_back({{"op", op}, {"case", name}, {"impl", impl}, {"refused", why}});
}

}  // namespace rtvd::bench
