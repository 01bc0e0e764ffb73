// What conv2d's implementations refuse, and the configs no candidate offers, with the problems of
// support/conv2d_problem.h (its implementations' outputs are conv2d_test.cpp's).
//   Conv2dCpuRules: conv2d_cpu pads the normalised input with zeros; its workspace (none without a gather,
//     a short one refused); a residual aliasing y under an activation, and the output sizes and activations
//     the CUDA kernels lack, refused with the reason.
//   Conv2dCudaRequirements (CUDA builds; the device-bound ones skip without a device): invalid params refused
//     before anything touches the device; a misaligned x taking the direct kernel; split-K and the wgmma
//     prologue needing workspace; every implicit-GEMM config and split-K factor against the CPU; cuDNN's plans
//     refusing other shapes, an aliased residual, epilogues its fused form lacks and padding after the input
//     alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_cases.h"
#include "support/conv2d_problem.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/conv2d/conv2d.cuh"
#include "kernels/conv2d/conv2d_candidates.cuh"
#include "kernels/conv2d/conv2d_sm90.cuh"
#include "kernels/conv2d/conv2d_stem.cuh"
#if RTVD_HAS_CUDNN
#include "kernels/conv2d/conv2d_cudnn.cuh"
#endif
#include "support/cuda_test_util.h"
#endif

namespace rtvd {
namespace {

using namespace test::conv;
using test::rel_l2;

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
// GPU: what the implementations refuse, and the configs no candidate offers

// A case's problem on the device with a fresh y, the params that write it and the candidates conv2d offers for
// them: what these tests hand the implementations.
struct GpuParams {
  GpuProblem problem;
  test::HalfTensor y;
  Conv2dParams p;
  std::vector<Conv2dCandidate> offered;
  GpuParams(const Conv2dCase& c, test::Rng& rng, const CudaContext& ctx)
      : problem(c, rng), y(problem.fresh_y()), p(problem.params(y.get())), offered(conv2d_candidates(p, ctx)) {}
};

CudaContext without_workspace(CudaContext ctx) {
  ctx.workspace = nullptr, ctx.workspace_bytes = 0;
  return ctx;
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

// x not 16-byte aligned: the implicit GEMM can't cp.async it and says so; conv2d() takes the direct kernel, or
// the stem kernel (which reads x a half at a time) where that applies (the outputs are checked by
// Conv2dCuda.Default).
TEST(Conv2dCudaRequirements, MisalignedInputTakesTheDirectKernel) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  for (const Conv2dCase& c : conv2d_cases()) {
    if (!c.x_misalign_bytes) continue;
    SCOPED_TRACE(describe(c));
    const GpuParams g(c, rng, host.ctx());
    const Conv2dParams& p = g.p;
    EXPECT_FALSE(conv2d_fast_path_ok(p));
    EXPECT_EQ(conv2d_choose_config(p, host.ctx()).kernel, Conv2dKernel::Direct);
    EXPECT_THROW(conv2d_with_config(p, {Conv2dKernel::Igemm64x64, 1}, host.ctx()), Error);
    const Conv2dCandidate& def = default_candidate(g.offered, p, host.ctx(), KernelFamily::Custom, "conv2d");
    EXPECT_TRUE(conv2d_stem_can_implement(p, host.ctx()) ? is_stem(def) : is_direct(def)) << def.name;
  }
}

TEST(Conv2dCudaRequirements, SplitKNeedsWorkspace) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  const GpuParams g(case_named("sd_scaled_4x4_1280_plain"), rng, host.ctx());
  const Conv2dParams& p = g.p;
  const CudaContext no_workspace = without_workspace(host.ctx());
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
  const GpuParams g(case_named("gn8_128_64"), rng, host.ctx());
  const Conv2dParams& p = g.p;
  std::string why;
  if (!conv2d_sm90_can_implement(p, host.ctx(), &why)) GTEST_SKIP() << why;
  EXPECT_GT(conv2d_sm90_workspace_bytes(p, conv2d_sm90_tile_named("64x128")), 0u);
  const CudaContext no_workspace = without_workspace(host.ctx());
  EXPECT_THROW(conv2d_sm90(p, no_workspace), Error);
  for (const Conv2dCandidate& cand : g.offered) {
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
  const GpuParams g({.name = "mismatch", .h = 8, .w = 8, .c_in = 32, .c_out = 32, .residual = true}, rng, host.ctx());
  const Conv2dParams& p = g.p;
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
    const GpuParams g(case_named(name), rng, host.ctx());
    const Conv2dParams& p = g.p;
    const Conv2dCandidate* fused = candidate_named(g.offered, "cuDNN fused");
    ASSERT_NE(fused, nullptr);
    std::string why;
    EXPECT_EQ(fused->can_implement(p, host.ctx(), &why), *refusal == '\0') << why;
    if (*refusal) {
      EXPECT_NE(why.find(refusal), std::string::npos) << why;
      EXPECT_THROW(make_conv2d_cudnn_plan(p, host.ctx().cudnn, size_t(32) << 20, true), Error);
    }
  }
  const GpuParams g(case_named("taesd_512x512_64_res_relu"), rng, host.ctx());
  const Conv2dParams& p = g.p;
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
    const GpuParams g(case_named(name), rng, host.ctx());
    const Conv2dParams& p = g.p;
    const Conv2dCandidate* cudnn = candidate_named(g.offered, "cuDNN");
    ASSERT_NE(cudnn, nullptr);
    std::string why;
    if (conv2d_symmetric(p)) {
      EXPECT_TRUE(cudnn->can_implement(p, host.ctx(), &why)) << why;
      continue;
    }
    EXPECT_FALSE(cudnn->can_implement(p, host.ctx(), &why));
    EXPECT_NE(why.find("pads both sides alike"), std::string::npos) << why;
    EXPECT_THROW(make_conv2d_cudnn_plan(p, host.ctx().cudnn), Error);
    const Conv2dCandidate& def = default_candidate(g.offered, p, host.ctx(), KernelFamily::Custom, "conv2d");
    EXPECT_TRUE(is_igemm(def) || is_direct(def)) << def.name;
  }
}
#endif  // RTVD_HAS_CUDNN

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
