// conv2d's implementations against their references, on its case table (kernels/conv2d/conv2d_cases.h), with
// the problems of support/conv2d_problem.h. Fresh random inputs every run (the seed is in the failure message);
// outputs and scratch poisoned with NaN, so an element left unwritten or scratch read before it is written
// fails the check. What each implementation refuses is conv2d_requirements_test.cpp's.
//   Conv2dCpu: conv2d_cpu against a direct convolution written from the math alone (float64), on every
//     case the naive loops can afford; rel L2 <= 1e-5 (fp32 BLAS against float64).
//   Conv2dCuda (CUDA builds, skipping without a device): every candidate (kernels/conv2d/conv2d_candidates.cuh)
//     that can run a case, one test per kind of implementation (Wgmma, Stem, Narrow, Igemm, Direct, Cudnn), and the
//     entry point conv2d() (Default), against conv2d_cpu on the same fp16-rounded inputs: rel L2 <= 2e-3 (fp16
//     storage of y, fp32 accumulation in a different order).
#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_cases.h"
#include "kernels/group_norm/group_norm.h"
#include "support/conv2d_problem.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/conv2d/conv2d.cuh"
#include "kernels/conv2d/conv2d_candidates.cuh"
#include "kernels/conv2d/conv2d_narrow.cuh"
#include "kernels/conv2d/conv2d_sm90.cuh"
#include "kernels/conv2d/conv2d_stem.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const Conv2dCase& c, std::ostream* os) { *os << c.name; }

namespace {

using namespace test::conv;
using test::rel_l2;

// ---------------------------------------------------------------------------------------------------
// CPU reference

class Conv2dCpu : public testing::TestWithParam<Conv2dCase> {};

TEST_P(Conv2dCpu, MatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  SCOPED_TRACE(describe(GetParam()));
  const ConvData data(GetParam(), rng, false);
  const std::vector<float> expected = data.naive();
  EXPECT_LE(rel_l2(data.cpu(), expected), kTolerance);
  // A residual that enters the GEMM may be the output buffer itself (the in-place skip connection).
  if (data.c.in_place && residual_enters_gemm(data.c)) {
    EXPECT_LE(rel_l2(data.cpu(true), expected), kTolerance) << "in place";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Conv2dCpu,
                         testing::ValuesIn(test::cases_where(
                             conv2d_cases(), [](const Conv2dCase& c) { return c.flops() / 2 <= kNaiveBudget; })),
                         test::case_name);

#if RTVD_HAS_CUDA
// ---------------------------------------------------------------------------------------------------
// GPU: every candidate and the entry point against conv2d_cpu

class Conv2dCuda : public test::OnCuda<Conv2dCase> {
 protected:
  // Each candidate of the kind that can run the case, twice (rtvd's kernels must agree bit for bit: no
  // races, split-K sums in a fixed order); with the GroupNorm prologue, those that apply it as a pass of
  // their own also with the statistics-only norm handed over. Skips when none of the kind can run it.
  void check_kind(const GpuProblem& pr, const std::function<bool(const Conv2dCandidate&)>& of_kind, const char* kind) {
    const test::HalfTensor probe = pr.fresh_y();
    const Conv2dParams p = pr.params(probe.get());
    const std::vector<Conv2dCandidate> all = conv2d_candidates(p, host_->ctx());
    std::string refused;
    const std::vector<const Conv2dCandidate*> mine = test::runnable_candidates(all, p, host_->ctx(), of_kind, &refused);
    if (mine.empty()) GTEST_SKIP() << "no " << kind << " candidate runs " << describe(GetParam()) << ": " << refused;
    for (const Conv2dCandidate* cand : mine) {
      SCOPED_TRACE(cand->name);
      const CudaContext& ctx = host_->with_workspace(cand->workspace_bytes(p, host_->ctx()));
      const auto launch = [&](const Conv2dParams& q) { cand->run(q, ctx, nullptr); };
      const std::vector<float> first = pr.run(ctx.stream, launch);
      expect_close(first, pr.ref, cand->name);
      if (cand->provider == Provider::Rtvd) {
        EXPECT_EQ(test::max_abs_diff(first, pr.run(ctx.stream, launch)), 0.0) << "two runs on the same inputs differ";
      }
      if (cand->provider == Provider::Cudnn && p.bias && p.bias_batch_stride == 0) {  // its fused epilogue's fp16 bias
        const test::HalfTensor bias_act = test::half_tensor(pr.data.bias);
        const auto with_bias_act = [&](const Conv2dParams& q) {
          Conv2dParams with = q;
          with.bias_act = bias_act.get();
          cand->run(with, ctx, nullptr);
        };
        EXPECT_EQ(test::max_abs_diff(first, pr.run(ctx.stream, with_bias_act)), 0.0)
            << "the bias given in fp16 (bias_act) gives what its conversion on every call gives";
      }
      if (cand->takes_prepass && pr.data.c.gn_groups) check_fused_norm(pr, *cand);
    }
  }

  // With the statistics-only GroupNorm handed over, the candidate computes the statistics of x itself (into
  // poisoned stats) in the launch that normalises, and the output is the conv of the true norm of x.
  void check_fused_norm(const GpuProblem& pr, const Conv2dCandidate& cand) {
    SCOPED_TRACE("statistics computed in the pre-pass");
    const Conv2dCase& c = pr.data.c;
    ConvData truth = pr.data;
    GroupNormParams norm;
    norm.n = c.n, norm.hw = c.h * c.w, norm.c = c.c_in, norm.groups = c.gn_groups, norm.eps = 1e-5f;
    GroupNormParams norm_cpu = norm;
    norm_cpu.x = truth.x.data(), norm_cpu.stats = truth.stats.data();
    group_norm_cpu(norm_cpu);
    const std::vector<float> ref = truth.cpu();

    const DeviceMemory stats = test::poisoned_float(truth.stats.size());
    const test::HalfTensor y = pr.fresh_y();
    Conv2dParams p = pr.params(y.get());
    p.gn_stats = stats.as<float>();
    norm.x = p.x, norm.stats = stats.as<float>();
    const CudaContext& ctx = host_->with_workspace(cand.workspace_bytes(p, host_->ctx()));
    cand.run(p, ctx, &norm);
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    expect_close(y.read(pr.data.s.y), ref, cand.name);
    EXPECT_LE(rel_l2(test::from_device_float(stats, truth.stats.size()), truth.stats), 1e-4);

    GroupNormParams other = norm;
    other.groups = c.gn_groups / 2;
    EXPECT_THROW(cand.run(p, ctx, &other), Error) << "a norm of other groups is not this conv's";
  }
};

// The wgmma/TMA kernel (sm_90a builds on an H100): its candidate tiles, and then every other tile that fits
// the case (conv2d_sm90 with that tile), on every case it takes.
TEST_P(Conv2dCuda, Wgmma) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GpuProblem pr(GetParam(), rng);
  check_kind(pr, is_wgmma, "wgmma");
  if (IsSkipped() || HasFatalFailure()) return;
  const test::HalfTensor probe = pr.fresh_y();
  const Conv2dParams p = pr.params(probe.get());
  const std::vector<Conv2dSm90Tile> tiles = conv2d_sm90_tiles(p, host_->ctx());
  EXPECT_FALSE(tiles.empty());
  const std::vector<Conv2dCandidate> all = conv2d_candidates(p, host_->ctx());
  for (const Conv2dSm90Tile& t : tiles) {
    if (candidate_named(all, "custom wgmma " + t.name)) continue;  // run above
    SCOPED_TRACE("wgmma tile " + t.name + " (not a candidate)");
    const CudaContext& ctx = host_->with_workspace(conv2d_sm90_workspace_bytes(p, t));
    expect_close(pr.run(ctx.stream, [&](const Conv2dParams& q) { conv2d_sm90(q, ctx, &t); }), pr.ref, t.name);
  }
}

// The stem kernel (c_in <= 3, 3x3, stride 1).
TEST_P(Conv2dCuda, Stem) {
  SCOPED_TRACE(test::seed_trace(rng));
  check_kind(GpuProblem(GetParam(), rng), is_stem, "stem");
}

// The narrow kernel (c_out <= 8, 1x1 or 3x3, stride 1).
TEST_P(Conv2dCuda, Narrow) {
  SCOPED_TRACE(test::seed_trace(rng));
  check_kind(GpuProblem(GetParam(), rng), is_narrow, "narrow");
}

// The mma.sync implicit GEMM: the config conv2d_choose_config() prefers and, where the wgmma kernel can't
// run the case, every other tile config and split-K factor.
TEST_P(Conv2dCuda, Igemm) {
  SCOPED_TRACE(test::seed_trace(rng));
  check_kind(GpuProblem(GetParam(), rng), is_igemm, "igemm");
}

// The direct kernel: any c_in and alignment.
TEST_P(Conv2dCuda, Direct) {
  SCOPED_TRACE(test::seed_trace(rng));
  check_kind(GpuProblem(GetParam(), rng), is_direct, "direct");
}

// cuDNN's convolution with our pre-pass and epilogue (a candidate wherever cuDNN has an algorithm).
TEST_P(Conv2dCuda, Cudnn) {
  SCOPED_TRACE(test::seed_trace(rng));
  check_kind(GpuProblem(GetParam(), rng), is_cudnn, "cuDNN");
}

// The entry point conv2d(): the default candidate (the stem kernel for c_in <= 3 where it applies, the narrow
// kernel for c_out <= 8, the wgmma kernel where it
// applies, else the implicit GEMM for c_in % 8 == 0 and an aligned x, else the direct kernel), the same bits
// every run.
TEST_P(Conv2dCuda, Default) {
  SCOPED_TRACE(test::seed_trace(rng));
  const Conv2dCase& c = GetParam();
  const GpuProblem pr(c, rng);
  const test::HalfTensor probe = pr.fresh_y();
  const Conv2dParams p = pr.params(probe.get());
  const std::vector<Conv2dCandidate> all = conv2d_candidates(p, host_->ctx());
  for (const Conv2dCandidate& cand : all) {
    EXPECT_EQ(is_stem(cand) + is_narrow(cand) + is_wgmma(cand) + is_igemm(cand) + is_direct(cand) + is_cudnn(cand), 1)
        << cand.name << ": every candidate is tested under exactly one kind";
  }
  const bool fast = c.c_in % 8 == 0 && c.x_misalign_bytes == 0;
  EXPECT_EQ(conv2d_fast_path_ok(p), fast);
  EXPECT_EQ(conv2d_choose_config(p, host_->ctx()).kernel == Conv2dKernel::Direct, !fast);
  const Conv2dCandidate& def = default_candidate(all, p, host_->ctx(), KernelFamily::Custom, "conv2d");
  SCOPED_TRACE("default candidate " + def.name);
  const bool stem = c.c_in <= 3 && c.k == 3 && c.stride == 1 && c.c_out % 8 == 0 && c.gn_groups == 0;
  EXPECT_EQ(conv2d_stem_can_implement(p, host_->ctx()), stem);
  const bool narrow = c.c_out <= 8 && (c.k == 1 || c.k == 3) && c.stride == 1 && fast;
  EXPECT_EQ(conv2d_narrow_can_implement(p, host_->ctx()), narrow);
  if (stem) {
    EXPECT_TRUE(is_stem(def)) << "where the stem kernel applies, conv2d() runs it";
  } else if (narrow) {
    EXPECT_TRUE(is_narrow(def)) << "where the narrow kernel applies, conv2d() runs it";
  } else if (conv2d_sm90_can_implement(p, host_->ctx())) {
    EXPECT_TRUE(is_wgmma(def)) << "where the wgmma kernel applies, conv2d() runs it";
  }
  const CudaContext& ctx = host_->with_workspace(def.workspace_bytes(p, host_->ctx()));
  const auto entry = [&](const Conv2dParams& q) { conv2d(q, ctx); };
  const std::vector<float> first = pr.run(ctx.stream, entry);
  expect_close(first, pr.ref, "conv2d()");
  EXPECT_EQ(test::max_abs_diff(first, pr.run(ctx.stream, entry)), 0.0) << "two runs on the same inputs differ";
  EXPECT_EQ(test::max_abs_diff(first, pr.run(ctx.stream, [&](const Conv2dParams& q) { def.run(q, ctx, nullptr); })),
            0.0)
      << "conv2d() runs the default candidate";
}

INSTANTIATE_TEST_SUITE_P(Production, Conv2dCuda, testing::ValuesIn(test::production_cases(conv2d_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, Conv2dCuda, testing::ValuesIn(test::edge_cases(conv2d_cases())), test::case_name);

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
