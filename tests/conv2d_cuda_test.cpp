// conv2d on the GPU against conv2d_cpu: the implicit-GEMM kernels (every tile config and split-K), the
// direct fallback and the cuDNN baseline. Fresh random inputs every run, rounded to fp16 so both sides see
// the same numbers; outputs poisoned with NaN so every element must be written; rel L2 <= 2e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/conv2d.cuh"
#include "kernels/conv2d_sm90.cuh"
#if RTVD_HAS_CUDNN
#include "kernels/conv2d_cudnn.cuh"
#include "kernels/group_norm.h"
#endif
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using test::DeviceBuffer;

constexpr double kTolerance = 2e-3;

enum class Per { None, Channel, Image };  // scale / bias: absent, one row for the batch, one row per image

struct ConvCase {
  int n, h, w, c_in, c_out, k, stride, pad;
  bool residual = false;
  Per scale = Per::None, bias = Per::None;
  bool silu = false;
  int gn_groups = 0;  // > 0: GroupNorm+SiLU prologue
};

std::string describe(const ConvCase& c) {
  const auto per = [](Per p) { return p == Per::None ? "-" : p == Per::Channel ? "channel" : "image"; };
  return cat("n", c.n, " ", c.h, "x", c.w, " ", c.c_in, "->", c.c_out, " k", c.k, " s", c.stride, " p", c.pad,
             c.residual ? " residual" : "", " scale ", per(c.scale), " bias ", per(c.bias), c.silu ? " silu" : "",
             c.gn_groups ? cat(" gn", c.gn_groups) : "");
}

// One case's inputs (fp16-rounded), the CPU reference output, and the same data on the device with a
// poisoned y. cpu and gpu are the same params over host floats and device halfs.
struct Problem {
  Conv2dParams cpu, gpu;
  std::vector<float> x, w, residual, scale, bias, stats, gamma, beta, ref;
  DeviceBuffer dx, dw, dresidual, dscale, dbias, dstats, dgamma, dbeta, dy;
};

Problem make_problem(const ConvCase& c, test::Rng& rng) {
  Problem pr;
  Conv2dParams p;
  p.n = c.n, p.h = c.h, p.w = c.w, p.c_in = c.c_in, p.c_out = c.c_out;
  p.kh = p.kw = c.k, p.stride = c.stride, p.pad = c.pad;
  p.h_out = conv2d_out_size(c.h, c.k, c.stride, c.pad), p.w_out = conv2d_out_size(c.w, c.k, c.stride, c.pad);
  p.scale_batch_stride = c.scale == Per::Image ? c.c_out : 0;
  p.bias_batch_stride = c.bias == Per::Image ? c.c_out : 0;
  p.gn_groups = c.gn_groups;
  p.act = c.silu ? Activation::Silu : Activation::None;

  const size_t x_size = size_t(c.n) * c.h * c.w * c.c_in, k = size_t(c.k) * c.k * c.c_in;
  const size_t y_size = size_t(c.n) * p.h_out * p.w_out * c.c_out;
  const float w_bound = std::sqrt(3.0f / float(k));  // unit-variance outputs for unit-variance inputs
  pr.x = test::round_to_half(rng.vector(x_size));
  pr.w = test::round_to_half(rng.vector(size_t(c.c_out) * k, -w_bound, w_bound));
  if (c.residual) pr.residual = test::round_to_half(rng.vector(y_size));
  if (c.scale != Per::None) pr.scale = rng.vector(size_t(c.scale == Per::Image ? c.n : 1) * c.c_out, 0.5f, 1.5f);
  if (c.bias != Per::None) pr.bias = rng.vector(size_t(c.bias == Per::Image ? c.n : 1) * c.c_out, -0.5f, 0.5f);
  if (c.gn_groups) {
    for (int i = 0; i < c.n * c.gn_groups; ++i) {
      pr.stats.push_back(rng.uniform(-0.5f, 0.5f));  // mean
      pr.stats.push_back(rng.uniform(0.5f, 2.0f));   // rstd
    }
    pr.gamma = rng.vector(c.c_in, 0.5f, 1.5f);
    pr.beta = rng.vector(c.c_in, -0.5f, 0.5f);
  }

  const auto host = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  pr.cpu = p;
  pr.cpu.x = pr.x.data(), pr.cpu.weight = pr.w.data(), pr.cpu.residual = host(pr.residual);
  pr.cpu.scale = host(pr.scale), pr.cpu.bias = host(pr.bias);
  pr.cpu.gn_stats = host(pr.stats), pr.cpu.gn_gamma = host(pr.gamma), pr.cpu.gn_beta = host(pr.beta);
  pr.ref.assign(y_size, 0.0f);
  pr.cpu.y = pr.ref.data();
  std::vector<float> workspace((conv2d_cpu_workspace_bytes(pr.cpu) + 3) / 4);
  pr.cpu.workspace = workspace.data(), pr.cpu.workspace_bytes = workspace.size() * 4;
  conv2d_cpu(pr.cpu);

  pr.dx = test::to_device_half(pr.x), pr.dw = test::to_device_half(pr.w), pr.dy = test::poisoned_half(y_size);
  pr.gpu = p;
  pr.gpu.x = pr.dx.get(), pr.gpu.weight = pr.dw.get(), pr.gpu.y = pr.dy.get();
  if (c.residual) pr.dresidual = test::to_device_half(pr.residual), pr.gpu.residual = pr.dresidual.get();
  if (c.scale != Per::None) pr.dscale = test::to_device_float(pr.scale), pr.gpu.scale = pr.dscale.as<float>();
  if (c.bias != Per::None) pr.dbias = test::to_device_float(pr.bias), pr.gpu.bias = pr.dbias.as<float>();
  if (c.gn_groups) {
    pr.dstats = test::to_device_float(pr.stats), pr.gpu.gn_stats = pr.dstats.as<float>();
    pr.dgamma = test::to_device_float(pr.gamma), pr.gpu.gn_gamma = pr.dgamma.as<float>();
    pr.dbeta = test::to_device_float(pr.beta), pr.gpu.gn_beta = pr.dbeta.as<float>();
  }
  return pr;
}

std::vector<float> gpu_result(const Problem& pr, cudaStream_t stream) {
  RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return test::from_device_half(pr.dy, pr.ref.size());
}

void expect_close(const std::vector<float>& got, const Problem& pr, const std::string& what) {
  const double err = test::rel_l2(got, pr.ref);
  EXPECT_LE(err, kTolerance) << what << ": rel L2 " << err << ", max abs diff " << test::max_abs_diff(got, pr.ref);
}

std::string config_name(const Conv2dConfig& cfg) { return cat(conv2d_kernel_name(cfg.kernel), " split_k ", cfg.split_k); }

// Runs conv2d() (its own choice of kernel) on each case; c_in % 8 == 0 must take the implicit GEMM.
void check_auto(const std::vector<ConvCase>& cases) {
  test::TestCudaContext tc;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (const ConvCase& c : cases) {
    Problem pr = make_problem(c, rng);
    const Conv2dConfig cfg = conv2d_choose_config(pr.gpu, tc.ctx);
    const std::string what = describe(c) + ", " + config_name(cfg);
    EXPECT_EQ(cfg.kernel == Conv2dKernel::Direct, c.c_in % 8 != 0) << what;
    EXPECT_EQ(conv2d_fast_path_ok(pr.gpu), c.c_in % 8 == 0) << what;
    conv2d(pr.gpu, tc.ctx);
    expect_close(gpu_result(pr, tc.ctx.stream), pr, what);
  }
}

TEST(Conv2dCuda, MatchesCpuOnAssortedShapes) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_auto({
      {2, 8, 8, 32, 32, 3, 1, 1, false, Per::None, Per::Channel, true},         // default model, scaled down
      {1, 9, 7, 64, 48, 3, 1, 1, true, Per::Image, Per::Image},                  // odd h/w, FiLM, residual
      {2, 17, 13, 40, 24, 3, 2, 1, true, Per::None, Per::Channel, true},        // stride 2, K tail (K = 360)
      {2, 6, 6, 320, 64, 1, 1, 0, true, Per::Channel, Per::Channel},            // 1x1 shortcut
      {1, 9, 9, 16, 24, 1, 2, 0},                                                 // 1x1 stride 2
      {2, 8, 8, 320, 320, 3, 1, 1, false, Per::None, Per::Image, true, 32},     // SD channels, GN prologue
      {2, 7, 5, 64, 20, 3, 1, 1, true, Per::Channel, Per::Channel, true, 8},    // c_out % 8 != 0: scalar stores
      {1, 7, 9, 8, 16, 3, 1, 0},                                                  // no padding, c_in 8
      {2, 6, 6, 32, 4, 3, 1, 1, true, Per::None, Per::Channel},                 // c_out 4 (conv_out)
      {2, 10, 12, 4, 32, 3, 1, 1, false, Per::None, Per::Channel, true},        // c_in 4: direct fallback
      {1, 9, 7, 3, 16, 3, 2, 1, true, Per::Image, Per::Image, true},            // c_in 3, stride 2: direct
      {2, 6, 5, 4, 8, 3, 1, 1, false, Per::None, Per::None, true, 2},           // direct with GN prologue
  });
}

// SD's hot 3x3 convs at reduced resolution (split-K territory) and the default model's convs at full size.
TEST(Conv2dCuda, MatchesCpuOnScaledProductionShapes) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_auto({
      {2, 16, 16, 320, 320, 3, 1, 1, true, Per::None, Per::Image, true},
      {2, 8, 8, 640, 640, 3, 1, 1, false, Per::None, Per::Image, false, 32},
      {2, 4, 4, 1280, 1280, 3, 1, 1, true, Per::None, Per::Image, true, 32},
      {2, 64, 64, 32, 32, 3, 1, 1, false, Per::Channel, Per::Image, true},
      {2, 32, 32, 64, 64, 3, 1, 1, true, Per::Channel, Per::Image, true},
      {2, 16, 16, 128, 128, 3, 1, 1, true, Per::Channel, Per::Image, true},
  });
}

// DESIGN.md's hot shapes at batch 2, as the U-Net runs them: FiLM bias, SiLU, and the GroupNorm variant.
TEST(Conv2dCuda, MatchesCpuOnProductionShapes) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_auto({
      {2, 64, 64, 320, 320, 3, 1, 1, false, Per::None, Per::Image, true},
      {2, 64, 64, 320, 320, 3, 1, 1, true, Per::None, Per::Image, false, 32},
      {2, 32, 32, 640, 640, 3, 1, 1, false, Per::None, Per::Image, true},
      {2, 32, 32, 640, 640, 3, 1, 1, true, Per::None, Per::Image, false, 32},
      {2, 16, 16, 1280, 1280, 3, 1, 1, false, Per::None, Per::Image, true},
      {2, 16, 16, 1280, 1280, 3, 1, 1, true, Per::None, Per::Image, false, 32},
  });
}

// Every kernel and a few split-K factors on one odd case: M = 198 and c_out = 168 leave tails in every
// tile config; K = 432 is 13.5 k-tiles.
TEST(Conv2dCuda, EveryKernelAndSplit) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::TestCudaContext tc;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int gn_groups : {0, 6}) {
    const ConvCase c{2, 11, 9, 48, 168, 3, 1, 1, true, Per::Image, Per::Image, true, gn_groups};
    for (Conv2dKernel kernel : {Conv2dKernel::Igemm64x64, Conv2dKernel::Igemm128x128, Conv2dKernel::Igemm128x160})
      for (int split_k : {1, 2, 3, 8}) {
        Problem pr = make_problem(c, rng);
        const Conv2dConfig cfg{kernel, split_k};
        conv2d_with_config(pr.gpu, cfg, tc.ctx);
        expect_close(gpu_result(pr, tc.ctx.stream), pr, describe(c) + ", " + config_name(cfg));
      }
    Problem pr = make_problem(c, rng);
    conv2d_with_config(pr.gpu, {Conv2dKernel::Direct, 1}, tc.ctx);
    expect_close(gpu_result(pr, tc.ctx.stream), pr, describe(c) + ", direct");
  }
}

// The wgmma/TMA kernel (sm_90a builds on an H100), every tile shape that fits, on the cases it takes: 3x3 and
// 1x1, c_out-ragged tiles (168 = 160 + 8), residual in place, FiLM, SD's hot shapes, the GroupNorm prologue.
TEST(Conv2dCuda, Sm90EveryTileMatchesCpu) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::TestCudaContext tc;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const ConvCase cases[] = {
      {2, 8, 8, 64, 168, 3, 1, 1, true, Per::Image, Per::Image, true},
      {1, 16, 16, 128, 96, 1, 1, 0, true, Per::Channel, Per::Channel},
      {2, 32, 32, 64, 64, 3, 1, 1, false, Per::None, Per::None},
      {2, 64, 64, 320, 320, 3, 1, 1, true, Per::None, Per::Image, true},
      {2, 32, 32, 640, 640, 3, 1, 1, false, Per::None, Per::Image, true},
      {2, 16, 16, 1280, 1280, 3, 1, 1, true, Per::None, Per::Image, false},
      {2, 64, 64, 320, 320, 3, 1, 1, true, Per::None, Per::Image, false, 32},  // GroupNorm: a pre-pass
      {2, 8, 8, 128, 64, 3, 1, 1, false, Per::Channel, Per::Channel, true, 8},
  };
  Problem probe = make_problem(cases[0], rng);
  std::string why;
  if (!conv2d_sm90_can_implement(probe.gpu, tc.ctx, &why)) GTEST_SKIP() << why;
  for (const ConvCase& c : cases) {
    const Problem reference = make_problem(c, rng);
    const std::vector<Conv2dSm90Tile> tiles = conv2d_sm90_tiles(reference.gpu, tc.ctx);
    EXPECT_FALSE(tiles.empty()) << describe(c);
    for (const Conv2dSm90Tile& t : tiles) {
      Problem pr = make_problem(c, rng);
      conv2d_sm90(pr.gpu, tc.ctx, &t);
      expect_close(gpu_result(pr, tc.ctx.stream), pr, describe(c) + ", wgmma " + t.name);
    }
  }
  // In place: y == residual.
  Problem pr = make_problem(cases[0], rng);
  pr.dy = test::to_device_half(pr.residual);
  pr.gpu.y = pr.dy.get(), pr.gpu.residual = pr.dy.get();
  conv2d_sm90(pr.gpu, tc.ctx);
  expect_close(gpu_result(pr, tc.ctx.stream), pr, describe(cases[0]) + ", wgmma in place");
  // The GroupNorm prologue runs as a pre-pass into ctx.workspace: without room for it, the kernel says so.
  Problem gn = make_problem({2, 8, 8, 64, 64, 3, 1, 1, false, Per::None, Per::None, false, 8}, rng);
  CudaContext no_workspace = tc.ctx;
  no_workspace.workspace = nullptr, no_workspace.workspace_bytes = 0;
  EXPECT_GT(conv2d_sm90_workspace_bytes(gn.gpu, conv2d_sm90_tile_named("64x128")), 0u);
  EXPECT_FALSE(conv2d_sm90_can_implement(gn.gpu, no_workspace, &why));
  EXPECT_NE(why.find("workspace"), std::string::npos) << why;
  EXPECT_THROW(conv2d_sm90(gn.gpu, no_workspace), Error);
}

// residual == y, the in-place skip connection: each element's residual is read before it is overwritten.
TEST(Conv2dCuda, ResidualMayAliasY) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::TestCudaContext tc;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const ConvCase c{2, 16, 16, 64, 96, 3, 1, 1, true, Per::None, Per::Image, true};
  for (Conv2dConfig cfg : {Conv2dConfig{Conv2dKernel::Igemm64x64, 1}, Conv2dConfig{Conv2dKernel::Igemm128x128, 2},
                           Conv2dConfig{Conv2dKernel::Direct, 1}}) {
    Problem pr = make_problem(c, rng);
    pr.dy = test::to_device_half(pr.residual);
    pr.gpu.y = pr.dy.get(), pr.gpu.residual = pr.dy.get();
    conv2d_with_config(pr.gpu, cfg, tc.ctx);
    expect_close(gpu_result(pr, tc.ctx.stream), pr, describe(c) + ", in place, " + config_name(cfg));
  }
}

// x not 16-byte aligned: the implicit GEMM can't cp.async it, conv2d() takes the direct kernel.
TEST(Conv2dCuda, UnalignedInputTakesTheFallback) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::TestCudaContext tc;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  Problem pr = make_problem({2, 6, 6, 32, 32, 3, 1, 1, true, Per::None, Per::Channel, true}, rng);
  std::vector<float> shifted(pr.x.size() + 1, 0.0f);
  std::copy(pr.x.begin(), pr.x.end(), shifted.begin() + 1);
  const DeviceBuffer dx = test::to_device_half(shifted);
  pr.gpu.x = dx.as<__half>() + 1;
  EXPECT_FALSE(conv2d_fast_path_ok(pr.gpu));
  EXPECT_EQ(conv2d_choose_config(pr.gpu, tc.ctx).kernel, Conv2dKernel::Direct);
  EXPECT_THROW(conv2d_with_config(pr.gpu, {Conv2dKernel::Igemm64x64, 1}, tc.ctx), Error);
  conv2d(pr.gpu, tc.ctx);
  expect_close(gpu_result(pr, tc.ctx.stream), pr, "unaligned x");
}

// Split-K sums partials in a fixed order and no kernel races: two runs agree bit for bit.
TEST(Conv2dCuda, RepeatedRunsAreBitwiseEqual) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::TestCudaContext tc;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (const ConvCase& c : {ConvCase{2, 8, 8, 640, 640, 3, 1, 1, true, Per::None, Per::Image, true, 32},
                            ConvCase{2, 32, 32, 64, 64, 3, 1, 1, true, Per::Channel, Per::Image, true}}) {
    Problem pr = make_problem(c, rng);
    conv2d(pr.gpu, tc.ctx);
    const std::vector<float> first = gpu_result(pr, tc.ctx.stream);
    pr.dy = test::poisoned_half(pr.ref.size());
    pr.gpu.y = pr.dy.get();
    conv2d(pr.gpu, tc.ctx);
    const std::vector<float> second = gpu_result(pr, tc.ctx.stream);
    EXPECT_EQ(test::max_abs_diff(first, second), 0.0) << describe(c) << ", " << config_name(conv2d_choose_config(pr.gpu, tc.ctx));
    expect_close(second, pr, describe(c));
  }
}

TEST(Conv2dCuda, SplitKNeedsWorkspace) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::TestCudaContext tc;
  test::Rng rng;
  Problem pr = make_problem({2, 4, 4, 1280, 1280, 3, 1, 1}, rng);
  CudaContext no_workspace = tc.ctx;
  no_workspace.workspace = nullptr, no_workspace.workspace_bytes = 0;
  EXPECT_GT(conv2d_choose_config(pr.gpu, tc.ctx).split_k, 1);
  EXPECT_EQ(conv2d_choose_config(pr.gpu, no_workspace).split_k, 1);
  EXPECT_THROW(conv2d_with_config(pr.gpu, {Conv2dKernel::Igemm128x160, 2}, no_workspace), Error);
}

// Invalid params are refused before anything touches the device: no device needed.
TEST(Conv2dCuda, RejectsInvalidParams) {
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
  bad.c_in = 4;
  EXPECT_THROW(conv2d_with_config(bad, {Conv2dKernel::Igemm64x64, 1}, ctx), Error);
  EXPECT_THROW(conv2d_with_config(p, {Conv2dKernel::Direct, 2}, ctx), Error);
}

#if RTVD_HAS_CUDNN

// A stream, workspace, cuDNN handle and seeded generator for each test; skips without a device.
class Conv2dCudnn : public ::testing::Test {
 protected:
  void SetUp() override {
    RTVD_SKIP_WITHOUT_CUDA();
    tc_ = std::make_unique<test::TestCudaContext>();
    cudnn_ = std::make_unique<test::CudnnHandle>();
  }
  const CudaContext& ctx() const { return tc_->ctx; }
  cudnnHandle_t cudnn() const { return cudnn_->handle; }
  test::Rng rng;

 private:
  std::unique_ptr<test::TestCudaContext> tc_;
  std::unique_ptr<test::CudnnHandle> cudnn_;
};

TEST_F(Conv2dCudnn, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<ConvCase> cases = {
      {1, 9, 7, 64, 48, 3, 1, 1, true, Per::Image, Per::Image},
      {2, 17, 13, 40, 24, 3, 2, 1, true, Per::None, Per::Channel, true},
      {2, 6, 6, 320, 64, 1, 1, 0, true, Per::Channel, Per::Channel},
      {2, 7, 5, 64, 20, 3, 1, 1, true, Per::Channel, Per::Channel, true, 8},
      {2, 10, 12, 4, 32, 3, 1, 1, false, Per::None, Per::Channel, true},
      {1, 9, 7, 3, 16, 3, 2, 1, true, Per::Image, Per::Image, true},
      {2, 8, 8, 32, 32, 3, 1, 1},  // nothing to fuse: no epilogue pass
      {2, 64, 64, 320, 320, 3, 1, 1, true, Per::None, Per::Image, false, 32},
      {2, 32, 32, 640, 640, 3, 1, 1, false, Per::None, Per::Image, true},
      {2, 16, 16, 1280, 1280, 3, 1, 1, true, Per::None, Per::Image, false, 32},
  };
  for (const ConvCase& c : cases) {
    Problem pr = make_problem(c, rng);
    const Conv2dCudnnPlan plan = make_conv2d_cudnn_plan(pr.gpu, cudnn());
    const DeviceBuffer workspace(plan.workspace_bytes);
    CudaContext ctx = this->ctx();
    ctx.workspace = workspace.get(), ctx.workspace_bytes = workspace.bytes();
    conv2d_cudnn(pr.gpu, plan, ctx);
    expect_close(gpu_result(pr, ctx.stream), pr, describe(c) + cat(", cuDNN algo ", int(plan.algo)));
  }
}

// With the statistics-only GroupNorm handed over, the cuDNN path computes the statistics of x itself (into
// poisoned stats) in the launch that normalises, and the output is the conv of the true norm of x.
TEST_F(Conv2dCudnn, FusedGroupNormComputesTheStatistics) {
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<ConvCase> cases = {
      {2, 64, 64, 320, 320, 3, 1, 1, true, Per::None, Per::Image, false, 32},
      {2, 16, 16, 1280, 640, 3, 1, 1, true, Per::None, Per::Channel, false, 32},
      {3, 7, 5, 64, 20, 3, 1, 1, true, Per::Channel, Per::Channel, true, 8},
  };
  for (const ConvCase& c : cases) {
    Problem pr = make_problem(c, rng);
    GroupNormParams norm;
    norm.n = c.n, norm.hw = c.h * c.w, norm.c = c.c_in, norm.groups = c.gn_groups, norm.eps = 1e-5f;
    GroupNormParams norm_cpu = norm;
    norm_cpu.x = pr.x.data(), norm_cpu.stats = pr.stats.data();  // pr.cpu.gn_stats: the reference reruns on them
    group_norm_cpu(norm_cpu);
    std::vector<float> workspace((conv2d_cpu_workspace_bytes(pr.cpu) + 3) / 4);
    pr.cpu.workspace = workspace.data(), pr.cpu.workspace_bytes = workspace.size() * 4;
    conv2d_cpu(pr.cpu);

    const DeviceBuffer stats = test::poisoned_float(pr.stats.size());
    pr.gpu.gn_stats = stats.as<float>();
    norm.x = pr.gpu.x, norm.stats = stats.as<float>();
    const Conv2dCudnnPlan plan = make_conv2d_cudnn_plan(pr.gpu, cudnn());
    const DeviceBuffer scratch(plan.workspace_bytes);
    CudaContext ctx = this->ctx();
    ctx.workspace = scratch.get(), ctx.workspace_bytes = scratch.bytes();
    conv2d_cudnn(pr.gpu, plan, ctx, &norm);
    expect_close(gpu_result(pr, ctx.stream), pr, describe(c));
    EXPECT_LE(test::rel_l2(test::from_device_float(stats, pr.stats.size()), pr.stats), 1e-4) << describe(c);

    GroupNormParams other = norm;
    other.groups = c.gn_groups / 2;
    EXPECT_THROW(conv2d_cudnn(pr.gpu, plan, ctx, &other), Error) << "a norm of other groups is not this conv's";
  }
}

TEST_F(Conv2dCudnn, RejectsMismatchedParams) {
  Problem pr = make_problem({2, 8, 8, 32, 32, 3, 1, 1, true}, rng);
  const Conv2dCudnnPlan plan = make_conv2d_cudnn_plan(pr.gpu, cudnn());
  const DeviceBuffer workspace(plan.workspace_bytes);
  CudaContext ctx = this->ctx();
  ctx.workspace = workspace.get(), ctx.workspace_bytes = workspace.bytes();
  auto other = pr.gpu;
  other.c_out = 16;
  EXPECT_THROW(conv2d_cudnn(other, plan, ctx), Error);
  other = pr.gpu;
  other.residual = other.y;
  EXPECT_THROW(conv2d_cudnn(other, plan, ctx), Error);
}

#endif  // RTVD_HAS_CUDNN

}  // namespace
}  // namespace rtvd
