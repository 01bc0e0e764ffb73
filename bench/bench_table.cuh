// The kernel benchmark's shared parts: random device inputs, honest timing (warm-up, median, a busy GPU so
// that host launch time is not counted, inputs rotated past L2) and the table of rows, each a rate against
// the ceilings measured in the same run.
#pragma once
#include <cuda_fp16.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/backends/cuda/cuda_host.h"

namespace rtvd::bench {

// Device memory for one case, freed with it.
class Buffers {
 public:
  void* half_random(size_t n, float scale = 1.0f);  // fp16, uniform in [-scale, scale]
  float* float_random(size_t n, float scale = 1.0f);
  void* raw(size_t bytes);

 private:
  std::vector<DeviceMemory> memory_;
};

// How many copies of an input of `bytes` keep a case's reads out of L2 (> 3x the H100's 50 MB).
int copies_for(size_t bytes);

class Table {
 public:
  // only: the one op to time ("linear"), or empty for all.
  Table(CudaHost& host, int runs, std::string only, nlohmann::json& out);
  CudaHost& host() { return host_; }
  bool wants(const std::string& op) const { return only_.empty() || only_ == op; }

  // Median ms of f(i) over the runs after 5 warm-ups; i picks the input copy. Each run waits behind a
  // ~50 us kernel, so a launcher's host time (large for library calls) is not counted, as in a frame's graph.
  double median_ms(const CudaContext& ctx, const std::function<void(int)>& f);
  // The same for several ways to run one case, their runs interleaved (run i of each, then run i + 1 of
  // each), so that clock and temperature drift weighs on all of them alike: rows meant to be compared. Each
  // call gets the next input index, so that no call finds its inputs in L2 from the call before.
  std::vector<double> medians_ms(const CudaContext& ctx, const std::vector<std::function<void(int)>>& fs);
  // Prints and records a row: flops > 0 gives TFLOP/s against the GEMM ceiling, else bytes GB/s against
  // the copy ceiling.
  void row(const std::string& op, const std::string& name, const std::string& impl, double ms, double flops,
           double bytes);
  // A candidate that can't run the case, said and recorded.
  void refused(const std::string& op, const std::string& name, const std::string& impl, const std::string& why);

 private:
  CudaHost& host_;
  int runs_;
  std::string only_;
  nlohmann::json& out_;
  Ceilings ceilings_;
};

// The rows of each op: conv2d, attention and linear by candidate (heavy_ops_bench.cu); every other op of the
// graph through its launcher (memory_ops_bench.cu). Production cases of each op's table (kernels/<op>/*_cases.h).
void bench_heavy_ops(Table& t);
void bench_memory_ops(Table& t);

}  // namespace rtvd::bench
