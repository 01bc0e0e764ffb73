// group_norm on its case table (kernels/group_norm/group_norm_cases.h). Fresh random inputs every run (the
// seed is in the failure message); outputs and statistics poisoned with NaN.
//   GroupNormCpu: group_norm_cpu against a naive two-pass definition (float64); rel L2 <= 1e-5.
//   GroupNormCuda (CUDA builds, skipping without a device): group_norm against group_norm_cpu on the same fp16
//     values: statistics (fp32) rel L2 <= 1e-4, y (fp16) <= 2e-3; and group_norm_apply from given statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/group_norm/group_norm.h"
#include "kernels/group_norm/group_norm_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/group_norm/group_norm.cuh"
#include "kernels/group_norm/group_norm_sm90.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const GroupNormCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::NormData;
using test::rel_l2;

constexpr double kTolerance = 1e-5;

std::string describe(const GroupNormCase& c) {
  return cat(c.name, ": n ", c.n, " hw ", c.hw, " c ", c.c, " groups ", c.groups, c.silu ? " silu" : "",
             c.stats_only ? " statistics only" : "", c.in_place ? " in place" : "", " offset ", c.offset, " stddev ",
             c.stddev);
}

class GroupNormCpu : public testing::TestWithParam<GroupNormCase> {};

TEST_P(GroupNormCpu, MatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const GroupNormCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  const NormData d(c, rng);
  const int per_group = c.c / c.groups;
  std::vector<float> stats_ref, y_ref(d.x.size());
  for (int img = 0; img < c.n; ++img)
    for (int g = 0; g < c.groups; ++g) {
      double sum = 0, sq = 0;
      const double count = double(c.hw) * per_group;
      for (int px = 0; px < c.hw; ++px)
        for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) sum += d.x[(size_t(img) * c.hw + px) * c.c + ch];
      const double mean = sum / count;
      for (int px = 0; px < c.hw; ++px)
        for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
          const double dev = d.x[(size_t(img) * c.hw + px) * c.c + ch] - mean;
          sq += dev * dev;
        }
      const double rstd = 1.0 / std::sqrt(sq / count + 1e-5);
      stats_ref.push_back(float(mean));
      stats_ref.push_back(float(rstd));
      for (int px = 0; px < c.hw; ++px)
        for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
          const size_t i = (size_t(img) * c.hw + px) * c.c + ch;
          const double v = (d.x[i] - mean) * rstd * d.gamma[ch] + d.beta[ch];
          y_ref[i] = float(c.silu ? v / (1.0 + std::exp(-v)) : v);
        }
    }
  std::vector<float> x = d.x, y = test::poisoned(d.x.size()), stats = test::poisoned(c.stats());
  group_norm_cpu(group_norm_params(c, x.data(), y.data(), stats.data(), d.gamma.data(), d.beta.data()));
  EXPECT_LE(rel_l2(stats, stats_ref), kTolerance);
  if (!c.stats_only) {
    EXPECT_LE(rel_l2(c.in_place ? x : y, y_ref), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GroupNormCpu, testing::ValuesIn(group_norm_cases()), test::case_name);

#if RTVD_HAS_CUDA

class GroupNormCuda : public test::OnCuda<GroupNormCase> {};

// In place, x is read after other blocks wrote y. Both kernels (the cluster one where it can run), and the grid
// kernel's both launch plans: the single launch, and with CudaContext::shares_gpu (a branch of the frame's graph
// beside it) statistics and normalisation apart.
TEST_P(GroupNormCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GroupNormCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  NormData d(c, rng);
  std::vector<float> x_ref = test::half_tensor(d.x).host, y_ref(c.elements()), stats_ref(c.stats());  // fp16's x
  group_norm_cpu(group_norm_params(c, x_ref.data(), y_ref.data(), stats_ref.data(), d.gamma.data(), d.beta.data()));
  const GroupNormParams shape = group_norm_params(c, nullptr, nullptr, nullptr, nullptr, nullptr);
  const bool clusters = group_norm_cluster_can_run(shape, host_->ctx());
  for (const auto& [kernel, shares_gpu] : {std::pair{GroupNormKernel::Grid, false}, std::pair{GroupNormKernel::Grid, true},
                                           std::pair{GroupNormKernel::Cluster, false}}) {
    if (kernel == GroupNormKernel::Cluster && !clusters) continue;
    SCOPED_TRACE(kernel == GroupNormKernel::Cluster ? "clusters" : shares_gpu ? "grid, shares_gpu" : "grid");
    const test::HalfTensor x = test::half_tensor(d.x);
    const DeviceMemory gamma = test::to_device_float(d.gamma), beta = test::to_device_float(d.beta);
    const DeviceMemory y = test::poisoned_half(c.elements()), stats = test::poisoned_float(c.stats());
    CudaContext ctx = host_->with_workspace(group_norm_workspace_bytes(c.n));
    ctx.shares_gpu = shares_gpu;
    group_norm(group_norm_params(c, x.get(), y.get(), stats.as<float>(), gamma.as<float>(), beta.as<float>()), ctx,
               kernel);
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    EXPECT_LE(rel_l2(test::from_device_float(stats, c.stats()), stats_ref), 1e-4);
    if (!c.stats_only) {
      EXPECT_LE(rel_l2(c.in_place ? x.read(c.elements()) : test::from_device_half(y, c.elements()),
                       c.in_place ? x_ref : y_ref),
                2e-3);
    }
  }
}

// group_norm_apply: y from the statistics given in stats (group_norm_cpu's of the same x, as x's producer would
// have written them), the statistics left as they are; a statistics-only case has no y and is refused.
TEST_P(GroupNormCuda, ApplyGivenStatistics) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GroupNormCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  NormData d(c, rng);
  std::vector<float> x_ref = test::half_tensor(d.x).host, y_ref(c.elements()), stats_ref(c.stats());
  group_norm_cpu(group_norm_params(c, x_ref.data(), y_ref.data(), stats_ref.data(), d.gamma.data(), d.beta.data()));
  const test::HalfTensor x = test::half_tensor(d.x);
  const DeviceMemory gamma = test::to_device_float(d.gamma), beta = test::to_device_float(d.beta);
  const DeviceMemory y = test::poisoned_half(c.elements()), stats = test::to_device_float(stats_ref);
  const GroupNormParams p = group_norm_params(c, x.get(), y.get(), stats.as<float>(), gamma.as<float>(), beta.as<float>());
  if (c.stats_only) {
    EXPECT_THROW(group_norm_apply(p, ctx()), Error);
    return;
  }
  group_norm_apply(p, ctx());
  sync();
  EXPECT_LE(rel_l2(c.in_place ? x.read(c.elements()) : test::from_device_half(y, c.elements()), c.in_place ? x_ref : y_ref),
            2e-3);
  EXPECT_EQ(test::max_abs_diff(test::from_device_float(stats, c.stats()), stats_ref), 0.0);
}

// The cluster kernel takes the U-Nets' norms (every SD level at batch 1 and 2, SDXL's 128x128 level) and
// leaves the autoencoders' 512x512 ones to the grid kernel, which Auto then runs.
TEST(GroupNormClusters, TakeTheUNetsNormsAndLeaveTheAutoencoders) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  GroupNormParams p;
  p.n = 1, p.hw = 1, p.c = 32, p.groups = 32;
  if (std::string why; !group_norm_cluster_can_run(p, host.ctx(), &why)) GTEST_SKIP() << why;  // not an sm_90a build and GPU
  for (const auto& [n, hw, c] : {std::tuple{1, 4096, 960}, std::tuple{2, 4096, 320}, std::tuple{1, 64, 2560},
                                 std::tuple{2, 16384, 960}, std::tuple{8, 4096, 640}}) {
    p.n = n, p.hw = hw, p.c = c;
    std::string why;
    EXPECT_TRUE(group_norm_cluster_can_run(p, host.ctx(), &why)) << n << "x" << hw << "x" << c << ": " << why;
  }
  p.n = 1, p.hw = 512 * 512, p.c = 128;
  std::string why;
  EXPECT_FALSE(group_norm_cluster_can_run(p, host.ctx(), &why));
  EXPECT_NE(why.find("shared memory"), std::string::npos) << why;
}

INSTANTIATE_TEST_SUITE_P(Production, GroupNormCuda, testing::ValuesIn(test::production_cases(group_norm_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, GroupNormCuda, testing::ValuesIn(test::edge_cases(group_norm_cases())), test::case_name);

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
