// attention on its case table (kernels/attention/attention_cases.h): self-attention reads q/k/v in place from
// one fused (tokens, 3C) projection; cross-attention reads q from (tokens, C) and k/v from one (tokens, 2C)
// buffer. Fresh N(0, stddev) inputs every run (the seed is in the failure message); outputs poisoned with
// NaN; columns of a padded output row past heads * head_dim belong to someone else and must stay as they were.
//   AttentionCpu: attention_cpu against an explicit softmax written here (float64; the causal mask as -inf
//     scores of the keys after the query), on every case the naive loops can afford; rel L2 <= 1e-5 (fp32
//     against float64).
//   AttentionCuda (CUDA builds, skipping without a device): every candidate
//     (kernels/attention/attention_candidates.cuh) that can run a case, one test per kind (Flash: the
//     mma.sync flash kernel; FlashWgmma: the sm_90a one; Gemm: cuBLASLt's two products around a softmax;
//     Fallback; Cudnn: cuDNN's fused SDPA), and the entry
//     point attention() (Default), against attention_cpu on the same fp16 values: rel L2 <= 2e-3 (fp16
//     output, fp32 softmax and accumulation in another order). Each runs twice and must agree bit for bit.
//     A candidate that can't apply the causal mask must refuse causal cases (the GEMM path and cuDNN's do).
//     Beyond the flash kernels' head dims the GEMM path must run (the SD VAE's 512 at 1024²: 16,384 tokens, in
//     chunks of query rows), also captured in a CUDA graph as a frame runs it (GemmCaptured).
//   AttentionGemmChunks: the GEMM path's chunks of query rows (attention_gemm_chunks.h) on random shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cases.h"
#include "kernels/attention/attention_gemm_chunks.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_candidates.cuh"
#include "kernels/attention/attention_gemm.cuh"
#include "kernels/attention/attention_sm90.cuh"
#if RTVD_HAS_CUDNN
#include "kernels/attention/attention_cudnn.cuh"
#endif
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::rel_l2;

constexpr double kTolerance = 1e-5;
constexpr double kNaiveBudget = 2e8;  // multiply-adds the naive loops may take per case

std::string describe(const AttentionCase& c) {
  return cat(c.name, ": b", c.batch, " h", c.heads, " d", c.head_dim, " q", c.q_len, " kv", c.kv_len,
             c.fused_qkv ? " fused qkv" : " cross layout", c.causal ? " causal" : "", c.o_pad ? cat(" o_pad ", c.o_pad) : "",
             c.input_stddev != 1.0f ? cat(" stddev ", c.input_stddev) : "",
             c.integer_qk ? cat(" integer q, k in +-", c.integer_qk) : "");
}

// A case's sources: (tokens, 3C) = [q | k | v] fused, or (tokens, C) queries and (tokens, 2C) = [k | v].
// With integer_qk the q and k blocks hold integers in [-r, r]. Rounded to fp16 for the GPU.
struct AttentionData {
  AttentionCase c;
  AttentionSizes s;
  std::vector<float> q_source, kv_source;

  AttentionData(const AttentionCase& cs, test::Rng& rng, bool fp16) : c(cs), s(attention_sizes(cs)) {
    const int C = c.channels();
    // blocks: how many C-wide blocks a row has; integer_blocks: how many of the first are q or k
    const auto fill = [&](size_t n, int blocks, int integer_blocks) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) {
        const bool integer = c.integer_qk && int(i % (size_t(blocks) * C)) / C < integer_blocks;
        v[i] = integer ? float(rng.integer(-c.integer_qk, c.integer_qk)) : c.input_stddev * rng.normal();
      }
      return fp16 ? test::round_to_half(std::move(v)) : v;
    };
    q_source = c.fused_qkv ? fill(s.q_source, 3, 2) : fill(s.q_source, 1, 1);
    if (!c.fused_qkv) kv_source = fill(s.kv_source, 2, 1);
  }

  AttentionParams host(float* o) const {
    return attention_params(c, q_source.data(), kv_source.data(), o, sizeof(float));
  }

  // attention_cpu into o (batch q_len, C + o_pad) that holds `outside` past C and NaN in the written columns.
  std::vector<float> cpu(float outside) const {
    const int C = c.channels(), stride = C + c.o_pad;
    std::vector<float> o(s.o, outside);
    for (size_t t = 0; t < size_t(c.batch) * c.q_len; ++t) std::fill_n(o.begin() + long(t * stride), C, test::kPoison);
    AttentionParams p = host(o.data());
    std::vector<float> ws = test::poisoned((attention_cpu_workspace_bytes(p) + 3) / 4);
    p.workspace = ws.data();
    p.workspace_bytes = attention_cpu_workspace_bytes(p);
    attention_cpu(p);
    return o;
  }
};

// ---------------------------------------------------------------------------------------------------
// CPU reference

class AttentionCpu : public testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionCpu, MatchesExplicitSoftmax) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  AttentionCase c = GetParam();
  if (!c.o_pad) c.o_pad = 3;  // o rows wider than the heads: the extra columns must stay as they are
  SCOPED_TRACE(describe(c));
  const AttentionData data(c, rng, false);
  constexpr float kUntouched = 7.0f;
  const std::vector<float> o = data.cpu(kUntouched);

  const AttentionParams p = data.host(nullptr);
  const auto* qp = static_cast<const float*>(p.q);
  const auto* kp = static_cast<const float*>(p.k);
  const auto* vp = static_cast<const float*>(p.v);
  const int width = c.channels();
  std::vector<float> got, expected;
  bool gap_untouched = true;
  double max_score = -INFINITY;
  for (int b = 0; b < c.batch; ++b)
    for (int i = 0; i < c.q_len; ++i) {
      const size_t token = size_t(b) * c.q_len + i;
      for (int h = 0; h < c.heads; ++h) {
        std::vector<double> s(c.kv_len);
        for (int j = 0; j < c.kv_len; ++j) {
          double dot = 0;
          for (int d = 0; d < c.head_dim; ++d)
            dot += double(qp[token * p.q_stride + h * c.head_dim + d]) *
                   kp[(size_t(b) * c.kv_len + j) * p.k_stride + h * c.head_dim + d];
          s[j] = c.causal && j > i ? -INFINITY : dot * p.scale;  // exp(-inf - max) = 0: no weight
        }
        const double max = *std::max_element(s.begin(), s.end());
        max_score = std::max(max_score, max);
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - max));
        for (int d = 0; d < c.head_dim; ++d) {
          double acc = 0;
          for (int j = 0; j < c.kv_len; ++j)
            acc += s[j] / sum * vp[(size_t(b) * c.kv_len + j) * p.v_stride + h * c.head_dim + d];
          expected.push_back(float(acc));
          got.push_back(o[token * p.o_stride + h * c.head_dim + d]);
        }
      }
      for (int gap = width; gap < p.o_stride; ++gap) gap_untouched &= o[token * p.o_stride + gap] == kUntouched;
    }
  EXPECT_LE(rel_l2(got, expected), kTolerance);
  EXPECT_TRUE(gap_untouched);
  if (c.integer_qk) {
    EXPECT_GT(max_score, 88.0) << "the case must reach scores where expf overflows";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionCpu,
                         testing::ValuesIn(test::cases_where(
                             attention_cases(), [](const AttentionCase& c) { return c.flops() / 2 <= kNaiveBudget; })),
                         test::case_name);

TEST(AttentionCpuRequirements, CausalNeedsSelfAttention) {
  std::vector<float> q(64 * 8, 1.0f), o(64 * 8);
  AttentionParams p;
  p.q = p.k = p.v = q.data();
  p.o = o.data();
  p.batch = p.heads = 1;
  p.head_dim = 8;
  p.q_len = 4;
  p.kv_len = 6;
  p.q_stride = p.k_stride = p.v_stride = p.o_stride = 8;
  p.causal = true;
  std::vector<float> ws((attention_cpu_workspace_bytes(p) + 3) / 4);
  p.workspace = ws.data();
  p.workspace_bytes = attention_cpu_workspace_bytes(p);
  try {
    attention_cpu(p);
    ADD_FAILURE() << "causal attention with q_len != kv_len ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q_len == kv_len"), std::string::npos) << e.what();
  }
}

// The GEMM path's chunks on random shapes: they cover the queries exactly, the last no longer than the others;
// one chunk's S (fp32) and P (fp16) of every head fit the budget at rows kv_pitch apart (kv_len rounded up to
// 8); as few chunks as the budget allows; the workspace holds S, then P, then cuBLASLt's scratch.
TEST(AttentionGemmChunks, CoverTheQueriesWithinTheBudget) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int64_t budget = int64_t(kAttentionGemmScoreBudget);
  for (int i = 0; i < 2000; ++i) {
    AttentionParams p;
    p.batch = 1;
    p.heads = rng.integer(1, 16);
    p.head_dim = 8 * rng.integer(1, 64);
    p.q_len = rng.integer(1, 70000);
    p.kv_len = rng.integer(1, 70000);
    SCOPED_TRACE(cat("heads ", p.heads, " q_len ", p.q_len, " kv_len ", p.kv_len));
    const AttentionGemmChunks c = attention_gemm_chunks(p);
    ASSERT_EQ(c.kv_pitch % 8, 0);
    ASSERT_GE(c.kv_pitch, p.kv_len);
    ASSERT_LT(c.kv_pitch, p.kv_len + 8);
    const int64_t row_bytes = int64_t(p.heads) * c.kv_pitch * 6;
    ASSERT_GE(c.rows, 1);
    ASSERT_LE(row_bytes * c.rows, budget);
    ASSERT_LT((c.count - 1) * c.rows, p.q_len);
    ASSERT_GE(c.count * c.rows, p.q_len);
    ASSERT_GE(c.tail_rows(p.q_len), 1);
    ASSERT_LE(c.tail_rows(p.q_len), c.rows);
    if (c.count > 1) ASSERT_GT(row_bytes * ((p.q_len + c.count - 2) / (c.count - 1)), budget) << "one chunk fewer fits";
    const int64_t scores = int64_t(p.heads) * c.rows * c.kv_pitch;
    ASSERT_GE(int64_t(c.probs_offset), scores * 4);
    ASSERT_GE(int64_t(c.scratch_offset), int64_t(c.probs_offset) + scores * 2);
    ASSERT_EQ(c.workspace_bytes, c.scratch_offset + kAttentionGemmCublasScratch);
  }
  // The VAE at 1024²: several chunks; at 512²: the whole image's scores at once, as before chunking.
  AttentionParams vae;
  vae.batch = vae.heads = 1;
  vae.head_dim = 512;
  vae.q_len = vae.kv_len = 16384;
  EXPECT_GT(attention_gemm_chunks(vae).count, 1);
  EXPECT_LE(attention_gemm_chunks(vae).workspace_bytes, kAttentionGemmScoreBudget + kAttentionGemmCublasScratch + 512);
  vae.q_len = vae.kv_len = 4096;
  EXPECT_EQ(attention_gemm_chunks(vae).count, 1);
  // Not even one query row of scores fits: no chunks.
  vae.kv_len = 50'000'000;
  EXPECT_EQ(attention_gemm_chunks(vae).rows, 0);
}

#if RTVD_HAS_CUDA
// ---------------------------------------------------------------------------------------------------
// GPU: every candidate and the entry point against attention_cpu

// One case's fp16 sources on both sides, the CPU reference, and a check of a GPU output against it.
struct GpuAttention {
  AttentionData data;
  std::vector<float> want;  // CPU output, (batch q_len, o_stride)
  DeviceMemory dq, dkv;

  GpuAttention(const AttentionCase& c, test::Rng& rng) : data(c, rng, true), want(data.cpu(0.0f)) {
    dq = test::to_device_half(data.q_source);
    if (!c.fused_qkv) dkv = test::to_device_half(data.kv_source);
  }

  AttentionParams params(void* o) const { return attention_params(data.c, dq.get(), dkv.get(), o, 2); }

  // What launch(params) writes into a poisoned output, as (batch q_len, o_stride).
  std::vector<float> run(cudaStream_t stream, const std::function<void(const AttentionParams&)>& launch) const {
    const DeviceMemory out = test::poisoned_half(data.s.o);
    launch(params(out.get()));
    RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
    return test::from_device_half(out, data.s.o);
  }

  // The written columns must match the CPU's; the pad columns must still hold the poison. Returns the
  // written columns.
  std::vector<float> check(const std::vector<float>& out) const {
    const int C = data.c.channels(), stride = C + data.c.o_pad;
    std::vector<float> ref, got;
    size_t pad_written = 0;
    for (size_t row = 0; row < size_t(data.c.batch) * data.c.q_len; ++row)
      for (int col = 0; col < stride; ++col) {
        const size_t i = row * stride + col;
        if (col < C) ref.push_back(want[i]), got.push_back(out[i]);
        else if (!std::isnan(out[i])) ++pad_written;
      }
    EXPECT_LE(rel_l2(got, ref), 2e-3) << "max abs diff " << test::max_abs_diff(got, ref);
    EXPECT_EQ(pad_written, 0u) << "elements written past heads * head_dim";
    return got;
  }
};

// The kinds, by candidate name ("custom flash", "custom flash wgmma", "custom fallback") and provider.
bool rtvd_named(const AttentionCandidate& c, const char* part) {
  return c.provider == Provider::Rtvd && c.name.find(part) != std::string::npos;
}
bool is_flash_wgmma(const AttentionCandidate& c) { return rtvd_named(c, "flash wgmma"); }
bool is_flash(const AttentionCandidate& c) { return rtvd_named(c, "flash") && !is_flash_wgmma(c); }
bool is_fallback(const AttentionCandidate& c) { return rtvd_named(c, "fallback"); }
bool is_cudnn(const AttentionCandidate& c) { return c.provider == Provider::Cudnn; }
bool is_gemm(const AttentionCandidate& c) { return c.provider == Provider::Cublaslt; }

class AttentionCuda : public test::OnCuda<AttentionCase> {
 protected:
  // The candidates of a kind that can run the case; skips the test when there are none.
  std::vector<const AttentionCandidate*> candidates(const GpuAttention& pr,
                                                    const std::function<bool(const AttentionCandidate&)>& of_kind,
                                                    const char* kind) {
    const DeviceMemory probe = test::poisoned_half(pr.data.s.o);
    const AttentionParams p = pr.params(probe.get());
    all_ = attention_candidates(p, host_->ctx());
    std::string refused;
    std::vector<const AttentionCandidate*> mine = test::runnable_candidates(all_, p, host_->ctx(), of_kind, &refused);
    if (mine.empty()) refused_ = cat("no ", kind, " candidate runs ", describe(pr.data.c), ": ", refused);
    return mine;
  }

  // Each candidate twice on the same inputs: both match the CPU and agree bit for bit.
  void check_twice(const GpuAttention& pr, const AttentionCandidate& cand, const CudaContext& ctx) {
    SCOPED_TRACE(cand.name);
    std::vector<float> got[2];
    for (auto& g : got) g = pr.check(pr.run(ctx.stream, [&](const AttentionParams& p) { cand.run(p, ctx); }));
    EXPECT_TRUE(got[0] == got[1]) << "two runs on the same inputs differ";
  }

  std::vector<AttentionCandidate> all_;
  std::string refused_;
};

// The mma.sync flash kernel: the large-grid block shape twice (a race shows up as a difference), then the
// small-grid one (for head dims up to 64: 128 and 64 query rows per block). The launcher picks the shape
// from the grid size and ctx.sm_count; 1 and a huge count force each.
TEST_P(AttentionCuda, Flash) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GpuAttention pr(GetParam(), rng);
  const auto mine = candidates(pr, is_flash, "flash");
  if (mine.empty()) GTEST_SKIP() << refused_;
  for (const AttentionCandidate* cand : mine) {
    SCOPED_TRACE(cand->name);
    auto run_gpu = [&](int sm_count) {
      CudaContext ctx = host_->with_workspace(cand->workspace_bytes(pr.params(nullptr), host_->ctx()));
      ctx.sm_count = sm_count;
      return pr.run(ctx.stream, [&](const AttentionParams& p) { cand->run(p, ctx); });
    };
    std::vector<float> got[2];
    {
      SCOPED_TRACE("large-grid blocks");
      got[0] = pr.check(run_gpu(1));
      got[1] = pr.check(run_gpu(1));
    }
    {
      SCOPED_TRACE("small-grid blocks");
      pr.check(run_gpu(1 << 20));
    }
    EXPECT_TRUE(got[0] == got[1]) << "two runs on the same inputs differ";
  }
}

// The wgmma/TMA kernel (sm_90a builds on an H100), on every case it takes: head dim 64, any lengths.
TEST_P(AttentionCuda, FlashWgmma) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GpuAttention pr(GetParam(), rng);
  const auto mine = candidates(pr, is_flash_wgmma, "flash wgmma");
  if (mine.empty()) GTEST_SKIP() << refused_;
  for (const AttentionCandidate* cand : mine) check_twice(pr, *cand, host_->ctx());
}

// The simple kernel for what the flash kernels can't load (any head dim and stride).
TEST_P(AttentionCuda, Fallback) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GpuAttention pr(GetParam(), rng);
  const auto mine = candidates(pr, is_fallback, "fallback");
  if (mine.empty()) GTEST_SKIP() << refused_;
  for (const AttentionCandidate* cand : mine) check_twice(pr, *cand, host_->ctx());
}

// Two cuBLASLt GEMMs around a softmax, for head dims beyond the flash kernels' (the VAE's 512): every case
// whose sizes and strides are multiples of 8; causal cases are refused by name.
TEST_P(AttentionCuda, Gemm) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GpuAttention pr(GetParam(), rng);
  const auto mine = candidates(pr, is_gemm, "GEMM");
  if (GetParam().causal) {
    EXPECT_TRUE(mine.empty()) << "the GEMM path must refuse a causal case";
    EXPECT_NE(refused_.find("causal"), std::string::npos) << refused_;
  }
  const AttentionParams p = pr.params(nullptr);
  if (!GetParam().causal && p.head_dim % 8 == 0 && !attention_can_implement(p)) {
    ASSERT_FALSE(mine.empty()) << "beyond the flash kernels' head dims the GEMM path must run: " << refused_;
  }
  if (mine.empty()) GTEST_SKIP() << refused_;
  const AttentionGemmChunks chunks = attention_gemm_chunks(p);
  SCOPED_TRACE(cat(chunks.count, " chunks of ", chunks.rows, " query rows, the last ", chunks.tail_rows(p.q_len)));
  for (const AttentionCandidate* cand : mine) {
    const CudaContext& ctx = host_->with_workspace(cand->workspace_bytes(p, host_->ctx()));
    check_twice(pr, *cand, ctx);
  }
}

// The GEMM path where its scores take several chunks, captured in a CUDA graph as a frame runs it (its plan
// made before, eagerly): no sync and no allocation inside the op. The replay matches the CPU.
TEST_P(AttentionCuda, GemmCaptured) {
  SCOPED_TRACE(test::seed_trace(rng));
  const AttentionCase& c = GetParam();
  AttentionParams shape;
  shape.heads = c.heads, shape.q_len = c.q_len, shape.kv_len = c.kv_len;
  if (attention_gemm_chunks(shape).count < 2) GTEST_SKIP() << "the scores fit one chunk";
  const GpuAttention pr(c, rng);
  const auto mine = candidates(pr, is_gemm, "GEMM");
  ASSERT_EQ(mine.size(), 1u) << refused_;
  const AttentionCandidate& gemm = *mine.front();
  const CudaContext& ctx = host_->with_workspace(gemm.workspace_bytes(pr.params(nullptr), host_->ctx()));
  const std::vector<float> got = pr.run(ctx.stream, [&](const AttentionParams& p) {
    ASSERT_TRUE(gemm.can_implement(p, ctx, nullptr));  // the plan, outside the capture
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    RTVD_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    gemm.run(p, ctx);
    RTVD_CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
    RTVD_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    RTVD_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    RTVD_CUDA_CHECK(cudaGraphExecDestroy(exec));
    RTVD_CUDA_CHECK(cudaGraphDestroy(graph));
  });
  pr.check(got);
}

#if RTVD_HAS_CUDNN
// cuDNN's fused attention, the library alternative: every head dim of the SD models (40, 64, 80, 160) must
// get an engine; other shapes cuDNN may refuse, by a message naming the shape. A plan runs only the shape it
// was made for.
TEST_P(AttentionCuda, Cudnn) {
  SCOPED_TRACE(test::seed_trace(rng));
  const AttentionCase& c = GetParam();
  if (c.head_dim % 8 != 0) GTEST_SKIP() << "cuDNN needs head_dim a multiple of 8";
  const GpuAttention pr(c, rng);
  if (c.causal) {  // the SDPA_FWD node of cuDNN 9.13-9.20 has no causal mask: refused, never run unmasked
    EXPECT_THROW(make_attention_cudnn_plan(pr.params(nullptr), host_->ctx().cudnn), Error);
    EXPECT_TRUE(candidates(pr, is_cudnn, "cuDNN").empty()) << "the cuDNN candidate must refuse a causal case";
    EXPECT_NE(refused_.find("causal"), std::string::npos) << refused_;
    GTEST_SKIP() << refused_;
  }
  AttentionCudnnPlan plan;
  try {
    plan = make_attention_cudnn_plan(pr.params(nullptr), host_->ctx().cudnn);
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(cat("head_dim ", c.head_dim)), std::string::npos) << what;
    const bool sd_head_dim = c.head_dim == 40 || c.head_dim == 64 || c.head_dim == 80 || c.head_dim == 160;
    if (sd_head_dim) FAIL() << what;
    GTEST_SKIP() << what;
  }
  ASSERT_LE(plan.workspace_bytes, host_->ctx().workspace_bytes);
  const DeviceMemory probe = test::poisoned_half(pr.data.s.o);
  AttentionParams other = pr.params(probe.get());
  other.kv_len += 1;
  EXPECT_THROW(attention_cudnn(other, plan, host_->ctx()), Error) << "a call with other sizes than the plan's";

  const auto mine = candidates(pr, is_cudnn, "cuDNN");
  ASSERT_FALSE(mine.empty()) << refused_;
  for (const AttentionCandidate* cand : mine) {
    const CudaContext& ctx = host_->with_workspace(cand->workspace_bytes(pr.params(probe.get()), host_->ctx()));
    check_twice(pr, *cand, ctx);
  }
}
#endif

// The entry point attention(): the default candidate (from 256 keys the wgmma kernel where it applies, else
// the mma.sync flash kernel, else the GEMM path, else the fallback), the same bits every run.
TEST_P(AttentionCuda, Default) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GpuAttention pr(GetParam(), rng);
  const DeviceMemory probe = test::poisoned_half(pr.data.s.o);
  const AttentionParams p = pr.params(probe.get());
  const std::vector<AttentionCandidate> all = attention_candidates(p, host_->ctx());
  for (const AttentionCandidate& cand : all) {
    EXPECT_EQ(is_flash(cand) + is_flash_wgmma(cand) + is_gemm(cand) + is_fallback(cand) + is_cudnn(cand), 1)
        << cand.name << ": every candidate is tested under exactly one kind";
  }
  const AttentionCandidate& def = default_candidate(all, p, host_->ctx(), KernelFamily::Custom, "attention");
  SCOPED_TRACE("default candidate " + def.name);
  if (attention_sm90_can_implement(p, host_->ctx()) && p.kv_len >= 256) {
    EXPECT_TRUE(is_flash_wgmma(def)) << "attention() runs the wgmma kernel from 256 keys on";
  }
  if (!attention_can_implement(p) && attention_gemm_can_implement(p, host_->ctx())) {
    EXPECT_TRUE(is_gemm(def)) << "beyond the flash kernels, attention() runs the GEMM path before the fallback";
  }
  const CudaContext& ctx = host_->with_workspace(def.workspace_bytes(p, host_->ctx()));
  const auto entry = [&](const AttentionParams& q) { attention(q, ctx); };
  const std::vector<float> first = pr.check(pr.run(ctx.stream, entry));
  EXPECT_TRUE(pr.check(pr.run(ctx.stream, entry)) == first) << "two runs on the same inputs differ";
  EXPECT_TRUE(pr.check(pr.run(ctx.stream, [&](const AttentionParams& q) { def.run(q, ctx); })) == first)
      << "attention() runs the default candidate";
}

INSTANTIATE_TEST_SUITE_P(Production, AttentionCuda, testing::ValuesIn(test::production_cases(attention_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, AttentionCuda, testing::ValuesIn(test::edge_cases(attention_cases())), test::case_name);

// Host-side checks only: no device needed.
TEST(AttentionCudaRequirements, RejectsWhatTheKernelCannotDo) {
  alignas(16) static unsigned char buffer[64];
  AttentionParams p;
  p.q = p.k = p.v = buffer;
  p.o = buffer;
  p.batch = 2;
  p.heads = 5;
  p.head_dim = 64;
  p.q_len = p.kv_len = 77;
  p.q_stride = p.k_stride = p.v_stride = 3 * 320;
  p.o_stride = 320;
  p.scale = 0.125f;
  std::string why;
  ASSERT_TRUE(attention_can_implement(p, &why)) << why;

  // What the flash kernel rejects, the fallback may still run; only what neither can run throws.
  auto rejected = [&](AttentionParams bad, const char* expected, bool fallback_runs_it = true) {
    std::string reason;
    EXPECT_FALSE(attention_can_implement(bad, &reason)) << expected;
    EXPECT_NE(reason.find(expected), std::string::npos) << reason;
    if (!fallback_runs_it) EXPECT_THROW(attention(bad, CudaContext{}), Error) << expected;
  };
  AttentionParams bad = p;
  bad.head_dim = 12;
  rejected(bad, "multiple of 8");
  bad.head_dim = 168;
  bad.q_stride = bad.k_stride = bad.v_stride = bad.o_stride = 5 * 168 * 3;
  rejected(bad, "multiple of 8");
  bad = p;
  bad.kv_len = 0;
  rejected(bad, "positive", false);
  bad = p;
  bad.k_stride = 3 * 320 + 4;
  rejected(bad, "strides must be multiples of 8");
  bad = p;
  bad.v = buffer + 8;
  rejected(bad, "16-byte aligned");
  bad = p;
  bad.scale = 0.0f;
  rejected(bad, "scale");
  bad = p;
  bad.o_stride = 300;
  rejected(bad, "at least heads * head_dim", false);
  bad = p;
  bad.causal = true;
  ASSERT_TRUE(attention_can_implement(bad, &why)) << why;
  bad.kv_len = 76;
  rejected(bad, "q_len == kv_len", false);  // the fallback refuses it too
  std::string reason;
  EXPECT_FALSE(attention_fallback_can_implement(bad, &reason));
  EXPECT_NE(reason.find("q_len == kv_len"), std::string::npos) << reason;

  // Causal at the VAE's head dim and 16,384 tokens: the flash kernels can't hold the head dim, the GEMM path has
  // no causal mask, the fallback's scores stop at 12288 keys. One line says each reason.
  AttentionParams vae = p;
  vae.batch = vae.heads = 1;
  vae.head_dim = 512;
  vae.q_len = vae.kv_len = 16384;
  vae.q_stride = vae.k_stride = vae.v_stride = 3 * 512;
  vae.o_stride = 512;
  vae.causal = true;
  const std::string message = test::error_of([&] { attention(vae, CudaContext{}); });
  EXPECT_NE(message.find("attention: no implementation can run these params ("), std::string::npos) << message;
  EXPECT_NE(message.find("cuBLASLt GEMM softmax GEMM: no causal mask"), std::string::npos) << message;
  EXPECT_NE(message.find("kv_len <= 12288"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
