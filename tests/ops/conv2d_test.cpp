// conv2d on its case table (kernels/conv2d/conv2d_cases.h). Fresh random inputs every run (the seed is in
// the failure message); outputs and scratch poisoned with NaN, so an element left unwritten or scratch read
// before it is written fails the check.
//   Conv2dCpu: conv2d_cpu against a direct convolution written here from the math alone (float64), on every
//     case the naive loops can afford; rel L2 <= 1e-5 (fp32 BLAS against float64).
//   Conv2dCuda (CUDA builds, skipping without a device): every candidate (kernels/conv2d/conv2d_candidates.cuh)
//     that can run a case, one test per kind of implementation (Wgmma, Igemm, Direct, Cudnn), and the entry
//     point conv2d() (Default), against conv2d_cpu on the same fp16-rounded inputs: rel L2 <= 2e-3 (fp16
//     storage of y, fp32 accumulation in a different order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "build_config.h"
#include "kernels/common/error.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_cases.h"
#include "kernels/group_norm/group_norm.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/conv2d/conv2d.cuh"
#include "kernels/conv2d/conv2d_candidates.cuh"
#include "kernels/conv2d/conv2d_narrow.cuh"
#include "kernels/conv2d/conv2d_sm90.cuh"
#if RTVD_HAS_CUDNN
#include "kernels/conv2d/conv2d_cudnn.cuh"
#endif
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const Conv2dCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::activation_ref;
using test::rel_l2;
using test::silu_ref;

constexpr double kTolerance = 1e-5;
constexpr double kNaiveBudget = 1e8;  // multiply-adds the naive loops may take per case (~0.3 s)

std::string describe(const Conv2dCase& c) {
  const auto rows = [](ConvRows r) { return r == ConvRows::None ? "-" : r == ConvRows::Channel ? "channel" : "image"; };
  return cat(c.name, ": n", c.n, " ", c.h, "x", c.w, " ", c.c_in, "->", c.c_out, " k", c.k, " s", c.stride, " p", c.pad,
             c.end() != c.pad ? cat(" pad_end ", c.end()) : "", c.residual ? " residual" : "",
             c.act_after_residual ? " (then the activation)" : "", " scale ", rows(c.scale), " bias ", rows(c.bias),
             c.act != Activation::None ? cat(" ", activation_name(c.act)) : "",
             c.gn_groups ? cat(" gn", c.gn_groups) : "", c.in_place ? " in place" : "",
             c.x_misalign_bytes ? cat(" x misaligned by ", c.x_misalign_bytes) : "");
}

// Whether the CPU's GEMM accumulates the residual itself (no scale, and no activation between the two), which
// lets y be the residual's buffer.
bool residual_enters_gemm(const Conv2dCase& c) {
  return c.residual && c.scale == ConvRows::None && (c.act == Activation::None || c.act_after_residual);
}

// Workspace of the requested size, poisoned too: an op must not read scratch it did not write.
std::vector<float> workspace_for(size_t bytes) { return test::poisoned((bytes + sizeof(float) - 1) / sizeof(float)); }

// One case's inputs: x, w and residual (rounded to fp16 for the GPU), scale, bias and the GroupNorm
// statistics and affine, drawn afresh.
struct ConvData {
  Conv2dCase c;
  Conv2dSizes s;
  std::vector<float> x, w, residual, scale, bias, stats, gamma, beta;

  ConvData(const Conv2dCase& cs, test::Rng& rng, bool fp16) : c(cs), s(conv2d_sizes(cs)) {
    const auto act = [fp16](std::vector<float> v) { return fp16 ? test::round_to_half(std::move(v)) : v; };
    const float w_bound = std::sqrt(3.0f / float(c.k * c.k * c.c_in));  // unit-variance outputs for unit-variance x
    x = act(rng.vector(s.x));
    w = act(rng.vector(s.weight, -w_bound, w_bound));
    if (c.residual) residual = act(rng.vector(s.y));
    scale = rng.vector(s.scale, 0.5f, 1.5f);
    bias = rng.vector(s.bias, -0.5f, 0.5f);
    for (int i = 0; i < c.n * c.gn_groups; ++i) {
      stats.push_back(rng.uniform(-0.5f, 0.5f));  // mean
      stats.push_back(rng.uniform(0.5f, 2.0f));   // rstd
    }
    gamma = rng.vector(s.gn_gamma, 0.5f, 1.5f);
    beta = rng.vector(s.gn_beta, -0.5f, 0.5f);
  }

  // The params over the host vectors, writing y; in place, y must hold the residual.
  Conv2dParams host(float* y, bool in_place) const {
    Conv2dCase k = c;
    k.in_place = in_place;
    return conv2d_params(k, {x.data(), w.data(), y, residual.data(), scale.data(), bias.data(), stats.data(),
                             gamma.data(), beta.data()});
  }

  // conv2d_cpu into a poisoned y (in place: y starts as the residual), with a poisoned workspace.
  std::vector<float> cpu(bool in_place = false) const {
    std::vector<float> y = in_place ? residual : test::poisoned(s.y);
    Conv2dParams p = host(y.data(), in_place);
    std::vector<float> ws = workspace_for(conv2d_cpu_workspace_bytes(p));
    p.workspace = ws.data();
    p.workspace_bytes = conv2d_cpu_workspace_bytes(p);
    conv2d_cpu(p);
    return y;
  }

  // pre(x) per conv2d.h: GroupNorm with the given statistics, affine, SiLU.
  double pre(int img, int ci, double v) const {
    if (!c.gn_groups) return v;
    const int g = ci / (c.c_in / c.gn_groups);
    const double mean = stats[(img * c.gn_groups + g) * 2], rstd = stats[(img * c.gn_groups + g) * 2 + 1];
    return silu_ref((v - mean) * rstd * gamma[ci] + beta[ci]);
  }

  // Direct convolution in float64. A padded tap (before the input, or after it up to the case's h_out and
  // w_out) contributes 0 (the definition); pad_with_pre_of_zero makes it contribute pre(0) instead, the
  // answer of an implementation that pads before normalising.
  std::vector<float> naive(bool pad_with_pre_of_zero = false) const {
    const int h_out = c.h_out(), w_out = c.w_out();
    std::vector<double> px(x.size());
    for (size_t i = 0; i < x.size(); ++i) px[i] = pre(int(i / (size_t(c.h) * c.w * c.c_in)), int(i % c.c_in), x[i]);
    std::vector<float> y(s.y);
    for (int img = 0; img < c.n; ++img)
      for (int oy = 0; oy < h_out; ++oy)
        for (int ox = 0; ox < w_out; ++ox)
          for (int co = 0; co < c.c_out; ++co) {
            double acc = 0;
            for (int ky = 0; ky < c.k; ++ky)
              for (int kx = 0; kx < c.k; ++kx) {
                const int iy = oy * c.stride - c.pad + ky, ix = ox * c.stride - c.pad + kx;
                const bool inside = iy >= 0 && iy < c.h && ix >= 0 && ix < c.w;
                const float* wr = &w[((size_t(co) * c.k + ky) * c.k + kx) * c.c_in];
                for (int ci = 0; ci < c.c_in; ++ci) {
                  const double v = inside                 ? px[((size_t(img) * c.h + iy) * c.w + ix) * c.c_in + ci]
                                   : pad_with_pre_of_zero ? pre(img, ci, 0.0)
                                                          : 0.0;
                  acc += v * wr[ci];
                }
              }
            const size_t row_s = c.scale == ConvRows::Image ? img : 0, row_b = c.bias == ConvRows::Image ? img : 0;
            if (c.scale != ConvRows::None) acc *= scale[row_s * c.c_out + co];
            if (c.bias != ConvRows::None) acc += bias[row_b * c.c_out + co];
            const size_t out = ((size_t(img) * h_out + oy) * w_out + ox) * c.c_out + co;
            const double r = c.residual ? residual[out] : 0.0;
            y[out] = float(c.act_after_residual ? activation_ref(acc + r, c.act) : activation_ref(acc, c.act) + r);
          }
    return y;
  }
};

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

// The prologue normalises the input; the zero padding comes after it, as in PyTorch, where the conv pads
// its own (already normalised) input. With beta = 1, silu(gn(0)) is far from 0, so padding the raw
// input with zeros (and normalising the pads) lands on a clearly different answer.
TEST(Conv2dCpuRules, PadsTheNormalisedInputWithZeros) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  ConvData data({.name = "pads", .h = 5, .w = 7, .c_in = 8, .c_out = 4, .gn_groups = 4}, rng, false);
  std::fill(data.beta.begin(), data.beta.end(), 1.0f);
  const std::vector<float> y = data.cpu();
  EXPECT_LE(rel_l2(y, data.naive()), kTolerance);
  EXPECT_GT(rel_l2(y, data.naive(/*pad_with_pre_of_zero=*/true)), 1e-2);
}

TEST(Conv2dCpuRules, WorkspaceIsZeroOnlyWithoutGather) {
  test::Rng rng;
  const auto bytes = [&](Conv2dCase c) {
    std::vector<float> y(conv2d_sizes(c).y);
    return conv2d_cpu_workspace_bytes(ConvData(c, rng, false).host(y.data(), false));
  };
  const Conv2dCase k1{.name = "k1", .h = 7, .w = 5, .c_in = 16, .c_out = 8, .k = 1, .pad = 0};
  Conv2dCase strided = k1, gn = k1, k3 = k1;
  strided.stride = 2;
  gn.gn_groups = 8;
  k3.k = 3, k3.pad = 1;
  EXPECT_EQ(bytes(k1), 0u);
  EXPECT_GT(bytes(strided), 0u);
  EXPECT_GT(bytes(gn), 0u);
  EXPECT_GT(bytes(k3), 0u);
}

TEST(Conv2dCpuRules, RejectsASmallWorkspace) {
  test::Rng rng;
  const ConvData data({.name = "small_ws", .n = 1, .h = 6, .w = 6, .c_in = 4, .c_out = 4}, rng, false);
  std::vector<float> y(36 * 4), ws(1);
  Conv2dParams p = data.host(y.data(), false);
  p.workspace = ws.data();
  p.workspace_bytes = conv2d_cpu_workspace_bytes(p) - sizeof(float);
  EXPECT_THROW(conv2d_cpu(p), Error);
}

// With an activation the residual is added after it: aliasing y cannot work, and is refused.
TEST(Conv2dCpuRules, RefusesResidualAliasUnderActivation) {
  test::Rng rng;
  for (const Conv2dCase& c : conv2d_cases()) {
    if (!c.in_place || c.act != Activation::None || c.flops() / 2 > kNaiveBudget) continue;
    SCOPED_TRACE(describe(c));
    const ConvData data(c, rng, false);
    std::vector<float> y = data.residual;
    Conv2dParams p = data.host(y.data(), true);
    std::vector<float> ws = workspace_for(conv2d_cpu_workspace_bytes(p));
    p.workspace = ws.data();
    p.workspace_bytes = conv2d_cpu_workspace_bytes(p);
    p.act = Activation::Silu;
    EXPECT_THROW(conv2d_cpu(p), Error);
  }
}

// The output sizes and activations the CUDA kernels take, no others: h_out and w_out with as many zeros after
// the input as before it or one more (Downsample2D), and act None, SiLU or ReLU.
TEST(Conv2dCpuRules, RejectsOutputSizesAndActivationsTheKernelsLack) {
  test::Rng rng;
  const Conv2dCase c{
      .name = "sizes", .n = 1, .h = 8, .w = 8, .c_in = 8, .c_out = 8, .stride = 2, .pad = 0, .pad_end = 1};
  const ConvData data(c, rng, false);
  std::vector<float> y(size_t(c.h_out() + 1) * (c.w_out() + 1) * c.c_out);
  Conv2dParams p = data.host(y.data(), false);
  EXPECT_EQ(p.h_out, 4);  // (8 + 0 + 1 - 3) / 2 + 1; without the extra zeros 3
  std::vector<float> ws = workspace_for(conv2d_cpu_workspace_bytes(p) * 2);
  p.workspace = ws.data();
  p.workspace_bytes = ws.size() * sizeof(float);
  for (int h_out : {3, 4}) {
    Conv2dParams ok = p;
    ok.h_out = h_out;
    EXPECT_NO_THROW(conv2d_cpu(ok)) << "h_out " << h_out;
  }
  for (int h_out : {2, 5}) {
    Conv2dParams bad = p;
    bad.h_out = h_out;
    EXPECT_PRED_FORMAT2(testing::IsSubstring, "pad_end = pad or pad + 1", test::error_of([&] { conv2d_cpu(bad); }))
        << "h_out " << h_out;
  }
  for (Activation act : {Activation::Gelu, Activation::QuickGelu, Activation::Tanh}) {
    Conv2dParams bad = p;
    bad.act = act;
    EXPECT_PRED_FORMAT2(testing::IsSubstring, "act must be None, Silu or Relu", test::error_of([&] { conv2d_cpu(bad); }));
  }
}

#if RTVD_HAS_CUDA
// ---------------------------------------------------------------------------------------------------
// GPU: every candidate and the entry point against conv2d_cpu

constexpr double kHalfTolerance = 2e-3;

// A case on the device: fp16-rounded inputs on both sides, the CPU reference output and the device copies.
struct GpuProblem {
  ConvData data;
  std::vector<float> ref;
  test::HalfTensor x, w, residual;
  DeviceMemory scale, bias, stats, gamma, beta;

  GpuProblem(const Conv2dCase& c, test::Rng& rng) : data(c, rng, true), ref(data.cpu()) {
    x = test::half_tensor(data.x, c.x_misalign_bytes);
    w = test::half_tensor(data.w);
    if (c.residual) residual = test::half_tensor(data.residual);
    if (!data.scale.empty()) scale = test::to_device_float(data.scale);
    if (!data.bias.empty()) bias = test::to_device_float(data.bias);
    if (c.gn_groups) {
      stats = test::to_device_float(data.stats);
      gamma = test::to_device_float(data.gamma);
      beta = test::to_device_float(data.beta);
    }
  }

  // The device params writing y (in place, y must hold the residual: fresh_y()).
  Conv2dParams params(void* y) const {
    return conv2d_params(data.c, {x.get(), w.get(), y, residual.get(), scale.as<float>(), bias.as<float>(),
                                  stats.as<float>(), gamma.as<float>(), beta.as<float>()});
  }
  test::HalfTensor fresh_y() const {
    return data.c.in_place ? test::half_tensor(data.residual) : test::poisoned_half_tensor(data.s.y);
  }
  // What launch(params) writes into a fresh y.
  std::vector<float> run(cudaStream_t stream, const std::function<void(const Conv2dParams&)>& launch) const {
    const test::HalfTensor y = fresh_y();
    launch(params(y.get()));
    RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
    return y.read(data.s.y);
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  const double err = rel_l2(got, ref);
  EXPECT_LE(err, kHalfTolerance) << what << ": rel L2 " << err << ", max abs diff " << test::max_abs_diff(got, ref);
}

bool named(const Conv2dCandidate& c, const char* part) {
  return c.provider == Provider::Rtvd && c.name.find(part) != std::string::npos;
}
bool is_narrow(const Conv2dCandidate& c) { return named(c, "narrow"); }
bool is_wgmma(const Conv2dCandidate& c) { return named(c, "wgmma"); }
bool is_igemm(const Conv2dCandidate& c) { return named(c, "igemm"); }
bool is_direct(const Conv2dCandidate& c) { return named(c, "direct"); }
bool is_cudnn(const Conv2dCandidate& c) { return c.provider == Provider::Cudnn; }

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

// The entry point conv2d(): the default candidate (the narrow kernel for c_out <= 8, the wgmma kernel where it
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
    EXPECT_EQ(is_narrow(cand) + is_wgmma(cand) + is_igemm(cand) + is_direct(cand) + is_cudnn(cand), 1)
        << cand.name << ": every candidate is tested under exactly one kind";
  }
  const bool fast = c.c_in % 8 == 0 && c.x_misalign_bytes == 0;
  EXPECT_EQ(conv2d_fast_path_ok(p), fast);
  EXPECT_EQ(conv2d_choose_config(p, host_->ctx()).kernel == Conv2dKernel::Direct, !fast);
  const Conv2dCandidate& def = default_candidate(all, p, host_->ctx(), KernelFamily::Custom, "conv2d");
  SCOPED_TRACE("default candidate " + def.name);
  const bool narrow = c.c_out <= 8 && (c.k == 1 || c.k == 3) && c.stride == 1 && fast;
  EXPECT_EQ(conv2d_narrow_can_implement(p, host_->ctx()), narrow);
  if (narrow) {
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

// ---------------------------------------------------------------------------------------------------
// GPU: what the implementations refuse, and the configs no candidate offers

const Conv2dCase& case_named(const std::string& name) {
  for (const Conv2dCase& c : conv2d_cases())
    if (c.name == name) return c;
  fail("no conv2d case named ", name);
}

// Invalid params are refused before anything touches the device: no device needed.
TEST(Conv2dCudaRequirements, RejectsInvalidParams) {
  int dummy[4] = {};
  Conv2dParams p;
  p.x = dummy, p.weight = dummy + 1, p.y = dummy + 2;
  p.n = 1, p.h = 8, p.w = 8, p.c_in = 8, p.c_out = 8, p.kh = p.kw = 3, p.pad = 1, p.h_out = 8, p.w_out = 8;
  const CudaContext ctx;
  auto bad = p;
  bad.h_out = 7;
  EXPECT_THROW(conv2d(bad, ctx), Error);
  bad = p;
  bad.x = nullptr;
  EXPECT_THROW(conv2d(bad, ctx), Error);
  bad = p;
  bad.gn_stats = bad.gn_gamma = bad.gn_beta = reinterpret_cast<const float*>(dummy + 3);
  bad.gn_groups = 3;  // does not divide c_in
  EXPECT_THROW(conv2d(bad, ctx), Error);
  bad = p;
  bad.h_out = 10;  // neither pad_end 1 (8) nor 2 (9)
  EXPECT_THROW(conv2d(bad, ctx), Error);
  bad = p;
  bad.act = Activation::Gelu;
  EXPECT_THROW(conv2d(bad, ctx), Error);
  bad = p;
  bad.c_in = 4;
  EXPECT_THROW(conv2d_with_config(bad, {Conv2dKernel::Igemm64x64, 1}, ctx), Error);
  EXPECT_THROW(conv2d_with_config(p, {Conv2dKernel::Direct, 2}, ctx), Error);
}

// x not 16-byte aligned: the implicit GEMM can't cp.async it and says so; conv2d() takes the direct kernel
// (its output is checked by Conv2dCuda.Default).
TEST(Conv2dCudaRequirements, MisalignedInputTakesTheDirectKernel) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  for (const Conv2dCase& c : conv2d_cases()) {
    if (!c.x_misalign_bytes) continue;
    SCOPED_TRACE(describe(c));
    const GpuProblem pr(c, rng);
    const test::HalfTensor y = pr.fresh_y();
    const Conv2dParams p = pr.params(y.get());
    EXPECT_FALSE(conv2d_fast_path_ok(p));
    EXPECT_EQ(conv2d_choose_config(p, host.ctx()).kernel, Conv2dKernel::Direct);
    EXPECT_THROW(conv2d_with_config(p, {Conv2dKernel::Igemm64x64, 1}, host.ctx()), Error);
    const std::vector<Conv2dCandidate> all = conv2d_candidates(p, host.ctx());
    EXPECT_TRUE(is_direct(default_candidate(all, p, host.ctx(), KernelFamily::Custom, "conv2d")));
  }
}

TEST(Conv2dCudaRequirements, SplitKNeedsWorkspace) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  const GpuProblem pr(case_named("sd_scaled_4x4_1280_plain"), rng);
  const test::HalfTensor y = pr.fresh_y();
  const Conv2dParams p = pr.params(y.get());
  CudaContext no_workspace = host.ctx();
  no_workspace.workspace = nullptr, no_workspace.workspace_bytes = 0;
  EXPECT_GT(conv2d_choose_config(p, host.ctx()).split_k, 1);
  EXPECT_EQ(conv2d_choose_config(p, no_workspace).split_k, 1);
  EXPECT_THROW(conv2d_with_config(p, {Conv2dKernel::Igemm128x160, 2}, no_workspace), Error);
}

// The wgmma kernel runs the GroupNorm prologue as a pre-pass into ctx.workspace: the candidate says how much
// it needs (can_implement leaves the workspace to the caller), and without it the run says so.
TEST(Conv2dCudaRequirements, WgmmaPrologueNeedsWorkspace) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  const GpuProblem pr(case_named("gn8_128_64"), rng);
  const test::HalfTensor y = pr.fresh_y();
  const Conv2dParams p = pr.params(y.get());
  std::string why;
  if (!conv2d_sm90_can_implement(p, host.ctx(), &why)) GTEST_SKIP() << why;
  EXPECT_GT(conv2d_sm90_workspace_bytes(p, conv2d_sm90_tile_named("64x128")), 0u);
  CudaContext no_workspace = host.ctx();
  no_workspace.workspace = nullptr, no_workspace.workspace_bytes = 0;
  EXPECT_THROW(conv2d_sm90(p, no_workspace), Error);
  const std::vector<Conv2dCandidate> all = conv2d_candidates(p, host.ctx());
  for (const Conv2dCandidate& cand : all) {
    if (!is_wgmma(cand)) continue;
    SCOPED_TRACE(cand.name);
    EXPECT_GT(cand.workspace_bytes(p, host.ctx()), 0u);
    const std::string error = test::error_of([&] { cand.run(p, no_workspace, nullptr); });
    EXPECT_NE(error.find("workspace"), std::string::npos) << error;
  }
}

// Every tile config and split-K factor of the implicit GEMM, and the direct kernel, on the cases with tails
// in every config (more than the candidates offer there).
TEST(Conv2dCudaRequirements, EveryIgemmConfigAndSplit) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (const char* name : {"tails_everywhere", "tails_everywhere_gn6"}) {
    const GpuProblem pr(case_named(name), rng);
    std::vector<Conv2dConfig> configs;
    for (Conv2dKernel kernel : {Conv2dKernel::Igemm64x64, Conv2dKernel::Igemm128x128, Conv2dKernel::Igemm128x160})
      for (int split_k : {1, 2, 3, 8}) configs.push_back({kernel, split_k});
    configs.push_back({Conv2dKernel::Direct, 1});
    for (const Conv2dConfig& cfg : configs) {
      const std::string what = cat(name, ", ", conv2d_kernel_name(cfg.kernel), " split_k ", cfg.split_k);
      const test::HalfTensor probe = pr.fresh_y();
      const CudaContext& ctx = host.with_workspace(conv2d_workspace_bytes(pr.params(probe.get()), cfg));
      expect_close(pr.run(ctx.stream, [&](const Conv2dParams& q) { conv2d_with_config(q, cfg, ctx); }), pr.ref, what);
    }
  }
}

#if RTVD_HAS_CUDNN
// A cuDNN plan is made for one shape: a call with other sizes, or with y aliasing the residual (its epilogue
// runs in place on y), is refused.
TEST(Conv2dCudaRequirements, CudnnPlanRejectsMismatchedParams) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  const GpuProblem pr({.name = "mismatch", .h = 8, .w = 8, .c_in = 32, .c_out = 32, .residual = true}, rng);
  const test::HalfTensor y = pr.fresh_y();
  const Conv2dParams p = pr.params(y.get());
  const Conv2dCudnnPlan plan = make_conv2d_cudnn_plan(p, host.ctx().cudnn);
  const CudaContext& ctx = host.with_workspace(plan.workspace_bytes);
  auto other = p;
  other.c_out = 16;
  EXPECT_THROW(conv2d_cudnn(other, plan, ctx), Error);
  other = p;
  other.residual = other.y;
  EXPECT_THROW(conv2d_cudnn(other, plan, ctx), Error);
  const std::vector<Conv2dCandidate> all = conv2d_candidates(other, ctx);
  const Conv2dCandidate* cudnn = candidate_named(all, "cuDNN");
  ASSERT_NE(cudnn, nullptr);
  std::string why;
  EXPECT_FALSE(cudnn->can_implement(other, ctx, &why));
  EXPECT_NE(why.find("alias"), std::string::npos) << why;
}

// cuDNN's fused form (cudnnConvolutionBiasActivationForward) is offered exactly where conv2d.h's epilogue is
// act(conv + residual + bias) with ReLU or none: the autoencoders' convs, which Conv2dCuda.Cudnn checks
// against the CPU; the U-Net's FiLM and SiLU epilogues are refused, naming the part it lacks.
TEST(Conv2dCudaRequirements, CudnnFusedFormWhereItsEpilogueFits) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"taesd_512x512_64_relu", ""},        {"taesd_512x512_64_res_relu", ""},
      {"vae_512x512_128_gn_res", ""},       {"wide_2x384_128_96_gn", ""},
      {"sd_64x64_320_film_silu", "bias row per image"}, {"scaled_16x16_128", "scale"}};
  for (const auto& [name, refusal] : cases) {
    SCOPED_TRACE(name);
    const GpuProblem pr(case_named(name), rng);
    const test::HalfTensor y = pr.fresh_y();
    const Conv2dParams p = pr.params(y.get());
    const std::vector<Conv2dCandidate> all = conv2d_candidates(p, host.ctx());
    const Conv2dCandidate* fused = candidate_named(all, "cuDNN fused");
    ASSERT_NE(fused, nullptr);
    std::string why;
    EXPECT_EQ(fused->can_implement(p, host.ctx(), &why), *refusal == '\0') << why;
    if (*refusal) {
      EXPECT_NE(why.find(refusal), std::string::npos) << why;
      EXPECT_THROW(make_conv2d_cudnn_plan(p, host.ctx().cudnn, size_t(32) << 20, true), Error);
    }
  }
  const GpuProblem pr(case_named("taesd_512x512_64_res_relu"), rng);
  const test::HalfTensor y = pr.fresh_y();
  const Conv2dParams p = pr.params(y.get());
  auto other = p;
  other.act_after_residual = false;
  std::string why;
  EXPECT_FALSE(conv2d_cudnn_fuses(other, &why));
  EXPECT_NE(why.find("residual after the activation"), std::string::npos) << why;
  // A fused plan runs only the activation it was made with: its descriptor holds it.
  const Conv2dCudnnPlan plan = make_conv2d_cudnn_plan(p, host.ctx().cudnn, size_t(32) << 20, true);
  other = p;
  other.act = Activation::None;
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "another activation",
                      test::error_of([&] { conv2d_cudnn(other, plan, host.with_workspace(plan.workspace_bytes)); }));
}

// cuDNN's descriptors pad both sides alike: a conv with a zero row and column only after its input
// (Downsample2D at an even size) is refused with that reason, and conv2d() runs it on rtvd's kernels (whose
// output the Conv2dCuda tests check). At an odd size the stride-2 windows never reach that row and column, so
// the conv is the symmetric one and cuDNN may run it.
TEST(Conv2dCudaRequirements, CudnnRefusesPaddingOnlyAfterTheInput) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  for (const char* name : {"downsample_pad_end", "downsample_pad_end_odd", "downsample_pad_end_c3"}) {
    SCOPED_TRACE(name);
    const GpuProblem pr(case_named(name), rng);
    const test::HalfTensor y = pr.fresh_y();
    const Conv2dParams p = pr.params(y.get());
    const std::vector<Conv2dCandidate> all = conv2d_candidates(p, host.ctx());
    const Conv2dCandidate* cudnn = candidate_named(all, "cuDNN");
    ASSERT_NE(cudnn, nullptr);
    std::string why;
    if (conv2d_symmetric(p)) {
      EXPECT_TRUE(cudnn->can_implement(p, host.ctx(), &why)) << why;
      continue;
    }
    EXPECT_FALSE(cudnn->can_implement(p, host.ctx(), &why));
    EXPECT_NE(why.find("pads both sides alike"), std::string::npos) << why;
    EXPECT_THROW(make_conv2d_cudnn_plan(p, host.ctx().cudnn), Error);
    const Conv2dCandidate& def = default_candidate(all, p, host.ctx(), KernelFamily::Custom, "conv2d");
    EXPECT_TRUE(is_igemm(def) || is_direct(def)) << def.name;
  }
}
#endif  // RTVD_HAS_CUDNN

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
