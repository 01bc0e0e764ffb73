#include "bench/kernel_bench.h"

#include "bench/bench_table.cuh"
#include "pipeline/backends/cuda/cuda_host.h"

namespace rtvd {

nlohmann::json bench_kernels(const GpuInfo& gpu, int runs, const std::string& only) {
  CudaHost host(gpu.index);
  nlohmann::json out = {{"gpu", gpu.name}, {"sm", gpu.sm}, {"runs", runs}};
  bench::Table table(host, runs, only, out);
  bench::bench_heavy_ops(table);
  bench::bench_memory_ops(table);
  if (!only.empty() && out["results"].empty()) fail("--op ", only, ": no op of that name has production cases");
  return out;
}

}  // namespace rtvd
