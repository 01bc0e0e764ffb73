// linear on its case table (kernels/linear/linear_cases.h). Fresh random inputs every run (the seed is in
// the failure message); outputs poisoned with NaN.
//   LinearCpu: linear_cpu against a naive definition (float64, its activations written here from their
//     definitions), on every case the naive loops can afford, also with y aliasing the residual where the
//     residual enters linearly; rel L2 <= 1e-5 (fp32 BLAS against float64).
//   LinearCuda (CUDA builds, skipping without a device): every candidate (kernels/linear/linear_candidates.cuh)
//     that can run a case, one test per kind (Cublaslt: cuBLASLt's first choice and each of its other ranked
//     algorithms; Fallback: rtvd's FMA kernel), and the entry point linear() (Default), against linear_cpu on
//     the same fp16 values: rel L2 <= 2e-3 (fp16 output).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/linear/linear.h"
#include "kernels/linear/linear_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/linear/linear.cuh"
#include "kernels/linear/linear_candidates.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const LinearCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::activation_ref;
using test::rel_l2;

constexpr double kTolerance = 1e-5;
constexpr double kNaiveBudget = 1e8;  // multiply-adds the naive loops may take per case

std::string describe(const LinearCase& c) {
  const char* residual[] = {"", " residual", " residual in place"};
  return cat(c.name, ": ", c.m, "x", c.k, " -> ", c.n, c.bias ? " bias" : "", residual[int(c.residual)],
             c.act != Activation::None ? cat(" ", activation_name(c.act)) : "", c.x_misalign_bytes ? cat(" x misaligned by ", c.x_misalign_bytes) : "");
}

// ---------------------------------------------------------------------------------------------------
// CPU reference

class LinearCpu : public testing::TestWithParam<LinearCase> {};

TEST_P(LinearCpu, MatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const LinearCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  const std::vector<float> x = rng.vector(size_t(c.m) * c.k), w = rng.vector(size_t(c.n) * c.k);
  const std::vector<float> bias = rng.vector(c.n), residual = rng.vector(size_t(c.m) * c.n);
  const bool has_residual = c.residual != LinearResidual::None;
  std::vector<float> expected(size_t(c.m) * c.n);
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double acc = c.bias ? bias[j] : 0.0;
      for (int l = 0; l < c.k; ++l) acc += double(x[size_t(i) * c.k + l]) * w[size_t(j) * c.k + l];
      acc = activation_ref(acc, c.act);
      expected[size_t(i) * c.n + j] = float(acc + (has_residual ? residual[size_t(i) * c.n + j] : 0.0));
    }
  // In place y starts as the residual; otherwise poisoned.
  std::vector<float> y = c.residual == LinearResidual::InPlace ? residual : test::poisoned(expected.size());
  LinearParams p = linear_params(c, x.data(), w.data(), bias.data(), residual.data(), y.data());
  linear_cpu(p);
  EXPECT_LE(rel_l2(y, expected), kTolerance);

  if (c.residual == LinearResidual::Separate && c.act == Activation::None) {  // in place too: h += linear(x)
    y = residual;
    p.y = y.data(), p.residual = y.data();
    linear_cpu(p);
    EXPECT_LE(rel_l2(y, expected), kTolerance) << "output aliasing the residual";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LinearCpu,
                         testing::ValuesIn(test::cases_where(
                             linear_cases(), [](const LinearCase& c) { return c.flops() / 2 <= kNaiveBudget; })),
                         test::case_name);

// activation.h's functions (the CUDA epilogue's exact GELU among them) against their definitions, over the
// range where they differ from 0 and x, including the negative tail where 1 + erf cancels. Tolerance abs 1e-7
// + rel 1e-6: fp32 libm, whose argument rounding the tails magnify; GELU's tanh approximation is off by 5e-4.
TEST(Activation, MatchesDefinitions) {
  for (const Activation act : {Activation::None, Activation::Silu, Activation::Gelu, Activation::QuickGelu,
                               Activation::Relu, Activation::Tanh})
    for (float x = -12.0f; x <= 12.0f; x += 0.0625f) {
      const double want = activation_ref(x, act);
      EXPECT_NEAR(apply_activation(x, act), want, 1e-7 + 1e-6 * std::abs(want)) << activation_name(act) << "(" << x << ")";
    }
}

TEST(LinearCpuRequirements, RejectsResidualAliasUnderActivation) {
  std::vector<float> buffer(64 * 64, 1.0f);
  LinearParams p;
  p.x = p.w = p.residual = buffer.data();
  p.y = buffer.data();
  p.m = p.n = p.k = 64;
  for (const Activation act : {Activation::Silu, Activation::Gelu, Activation::QuickGelu, Activation::Relu, Activation::Tanh}) {
    p.act = act;
    EXPECT_THROW(linear_cpu(p), Error) << activation_name(act);
  }
}

#if RTVD_HAS_CUDA
// ---------------------------------------------------------------------------------------------------
// GPU: every candidate and the entry point against linear_cpu

constexpr double kHalfTolerance = 2e-3;

// One case's fp16 inputs on both sides (x off its alignment as the case says), the CPU reference, and runs
// into a fresh y (the residual in place, else poisoned).
struct GpuLinear {
  LinearCase c;
  test::HalfTensor x, w, residual;
  std::vector<float> bias;
  DeviceMemory bias_d;
  std::vector<float> ref;

  GpuLinear(const LinearCase& cs, test::Rng& rng) : c(cs) {
    const float w_scale = 1.0f / std::sqrt(float(c.k));
    x = test::half_tensor(rng.vector(size_t(c.m) * c.k), c.x_misalign_bytes);
    w = test::half_tensor(rng.vector(size_t(c.n) * c.k, -w_scale, w_scale));
    bias = rng.vector(c.n);
    bias_d = test::to_device_float(bias);
    residual = test::half_tensor(rng.vector(size_t(c.m) * c.n));
    ref = c.residual == LinearResidual::InPlace ? residual.host : std::vector<float>(size_t(c.m) * c.n);
    linear_cpu(linear_params(c, x.host.data(), w.host.data(), bias.data(), residual.host.data(), ref.data()));
  }
  size_t out_size() const { return size_t(c.m) * c.n; }
  test::HalfTensor fresh_y() const {
    return c.residual == LinearResidual::InPlace ? test::half_tensor(residual.host) : test::poisoned_half_tensor(out_size());
  }
  LinearParams params(void* y) const { return linear_params(c, x.get(), w.get(), bias_d.as<float>(), residual.get(), y); }
  std::vector<float> run(cudaStream_t stream, const std::function<void(const LinearParams&)>& launch) const {
    const test::HalfTensor y = fresh_y();
    launch(params(y.get()));
    RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
    return y.read(out_size());
  }
};

bool is_cublaslt(const LinearCandidate& c) { return c.provider == Provider::Cublaslt; }
bool is_fallback(const LinearCandidate& c) { return c.provider == Provider::Rtvd; }  // "custom fallback", rtvd's one

// cuBLASLt can't run a GEMM of 8 rows or fewer (the fallback's one launch is faster), n or k not a multiple of
// 8, or a misaligned operand.
bool takes_fallback(const LinearCase& c) { return c.m <= 8 || c.n % 8 || c.k % 8 || c.x_misalign_bytes; }

class LinearCuda : public test::OnCuda<LinearCase> {
 protected:
  // Each candidate of the kind that can run the case, on a fresh y; skips when there are none.
  void check_kind(const GpuLinear& pr, const std::function<bool(const LinearCandidate&)>& of_kind, const char* kind) {
    const test::HalfTensor probe = pr.fresh_y();
    const LinearParams p = pr.params(probe.get());
    const std::vector<LinearCandidate> all = linear_candidates(p, host_->ctx());
    std::string refused;
    const auto mine = test::runnable_candidates(all, p, host_->ctx(), of_kind, &refused);
    if (mine.empty()) GTEST_SKIP() << "no " << kind << " candidate runs " << describe(pr.c) << ": " << refused;
    for (const LinearCandidate* cand : mine) {
      SCOPED_TRACE(cand->name);
      const CudaContext& ctx = host_->with_workspace(cand->workspace_bytes(p, host_->ctx()));
      EXPECT_LE(rel_l2(pr.run(ctx.stream, [&](const LinearParams& q) { cand->run(q, ctx); }), pr.ref), kHalfTolerance);
    }
  }
};

// cuBLASLt's first choice and each other algorithm it ranks for the GEMM (the candidates `auto` times); a
// name that is no algorithm runs the first choice.
TEST_P(LinearCuda, Cublaslt) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GpuLinear pr(GetParam(), rng);
  check_kind(pr, is_cublaslt, "cuBLASLt");
  if (IsSkipped() || HasFatalFailure()) return;
  const CudaContext& ctx = host_->ctx();
  const std::vector<float> first_choice = pr.run(ctx.stream, [&](const LinearParams& q) { linear_cublaslt(q, ctx); });
  EXPECT_EQ(pr.run(ctx.stream, [&](const LinearParams& q) { linear_cublaslt(q, ctx, "cuBLASLt 00"); }), first_choice)
      << "a name that is no algorithm runs the first choice";
  if (!pr.c.bias) return;
  const test::HalfTensor bias_act = test::half_tensor(pr.bias);
  EXPECT_EQ(pr.run(ctx.stream,
                   [&](const LinearParams& q) {
                     LinearParams with = q;
                     with.bias_act = bias_act.get();
                     linear_cublaslt(with, ctx);
                   }),
            first_choice)
      << "the bias given in fp16 (bias_act) gives what its conversion on every call gives";
}

// rtvd's tiled FMA kernel: any shape and alignment.
TEST_P(LinearCuda, Fallback) {
  SCOPED_TRACE(test::seed_trace(rng));
  check_kind(GpuLinear(GetParam(), rng), is_fallback, "fallback");
}

// The entry point linear(): cuBLASLt's first choice where it can run the GEMM, else the fallback kernel.
TEST_P(LinearCuda, Default) {
  SCOPED_TRACE(test::seed_trace(rng));
  const LinearCase& c = GetParam();
  const GpuLinear pr(c, rng);
  const test::HalfTensor probe = pr.fresh_y();
  const LinearParams p = pr.params(probe.get());
  const std::vector<std::string> algorithms = linear_algorithms(p, host_->ctx());
  EXPECT_EQ(algorithms.empty(), takes_fallback(c)) << algorithms.size() << " algorithms";
  const std::vector<LinearCandidate> all = linear_candidates(p, host_->ctx());
  for (const LinearCandidate& cand : all) {
    EXPECT_EQ(is_cublaslt(cand) + is_fallback(cand), 1) << cand.name << ": every candidate is tested under one kind";
  }
  const LinearCandidate& def = default_candidate(all, p, host_->ctx(), KernelFamily::Custom, "linear");
  SCOPED_TRACE("default candidate " + def.name);
  EXPECT_EQ(is_fallback(def), takes_fallback(c));
  const CudaContext& ctx = host_->with_workspace(def.workspace_bytes(p, host_->ctx()));
  const std::vector<float> first = pr.run(ctx.stream, [&](const LinearParams& q) { linear(q, ctx); });
  EXPECT_LE(rel_l2(first, pr.ref), kHalfTolerance);
  EXPECT_EQ(pr.run(ctx.stream, [&](const LinearParams& q) { def.run(q, ctx); }), first)
      << "linear() runs the default candidate";
}

INSTANTIATE_TEST_SUITE_P(Production, LinearCuda, testing::ValuesIn(test::production_cases(linear_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, LinearCuda, testing::ValuesIn(test::edge_cases(linear_cases())), test::case_name);

TEST(LinearCudaRequirements, RejectsResidualAliasUnderActivation) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  const DeviceMemory buffer = test::poisoned_half(64 * 64);
  LinearParams p;
  p.x = p.w = p.residual = buffer.get();
  p.y = buffer.get();
  p.m = p.n = p.k = 64;
  for (const Activation act : {Activation::Silu, Activation::Gelu, Activation::QuickGelu}) {
    p.act = act;
    EXPECT_THROW(linear(p, host.ctx()), Error) << activation_name(act);
  }
}

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
