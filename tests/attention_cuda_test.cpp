// attention (flash kernel) vs attention_cpu on fresh N(0, 1) inputs rounded to fp16. Self-attention reads
// q/k/v in place from one fused (tokens, 3C) projection; cross-attention reads q from (tokens, C) and k/v
// from one (tokens, 2C) buffer. Head dims 8..160, odd lengths, batch 1-2, heads 1-10, peaked softmax rows.
// Outputs are poisoned first; columns of a padded output row past heads * head_dim must stay poisoned.
// The sm_90 wgmma kernel (attention_sm90) and cuDNN's fused attention (attention_cudnn) are checked on the
// same cases.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/attention.cuh"
#include "kernels/attention_sm90.cuh"
#if RTVD_HAS_CUDNN
#include "kernels/attention_cudnn.cuh"
#endif
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

struct Case {
  const char* name;
  int batch, heads, head_dim, q_len, kv_len;
  bool fused_qkv;             // self-attention from one (tokens, 3C) buffer, else the cross-attention layout
  float input_stddev = 1.0f;  // above 1: logits of stddev input_stddev^2, so rows are nearly one-hot
  int o_pad = 0;              // extra elements per output row, which the kernel must not write
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const Case kCases[] = {
    // Self-attention, production shapes (DESIGN.md) and scaled-down ones.
    {"sd21_64x64_scaled", 2, 5, 64, 512, 512, true},
    {"sd21_32x32", 2, 10, 64, 1024, 1024, true},
    {"default_16x16", 2, 4, 32, 256, 256, true},
    {"sd15_d40_scaled", 2, 8, 40, 320, 320, true},
    {"sd15_d80_odd", 1, 8, 80, 257, 257, true},
    {"sd15_d160_16x16", 2, 8, 160, 256, 256, true},
    // Self-attention, odd sizes and every instance of the head-dim switch.
    {"q67_d64_pad", 1, 3, 64, 67, 67, true, 1.0f, 8},
    {"single_token", 1, 1, 64, 1, 1, true},
    {"d8_len37", 1, 2, 8, 37, 37, true},
    {"d24_len129", 2, 5, 24, 129, 129, true},
    {"d56_len100", 1, 2, 56, 100, 100, true},
    {"d96_len129", 1, 2, 96, 129, 129, true},
    {"d120_len77", 1, 1, 120, 77, 77, true},
    {"d128_len200", 1, 1, 128, 200, 200, true},
    {"d136_len67_pad", 1, 2, 136, 67, 67, true, 1.0f, 8},
    // Cross-attention: 77 context tokens, odd key counts, a single key, a single query.
    {"sd21_cross_scaled", 2, 5, 64, 512, 77, false},
    {"sd15_cross_d40", 2, 8, 40, 256, 77, false},
    {"cross_d80_kv37_pad", 1, 2, 80, 67, 37, false, 1.0f, 8},
    {"cross_d160_kv129", 2, 3, 160, 130, 129, false},
    {"cross_d48_kv33", 1, 5, 48, 129, 33, false},
    {"cross_d32_q1", 1, 1, 32, 1, 300, false},
    {"cross_kv1", 2, 4, 64, 200, 1, false},
    // Peaked softmax: the running max moves by large steps between key tiles.
    {"peaked_d64", 1, 2, 64, 300, 300, true, 4.0f},
    {"peaked_d40", 1, 3, 40, 200, 200, true, 4.0f},
    {"peaked_cross_d160", 1, 2, 160, 67, 129, false, 3.0f},
    // Head dims the flash kernel can't load take the fallback kernel (the tiny test models).
    {"fallback_d4", 2, 2, 4, 64, 64, true},
    {"fallback_cross_d12", 1, 3, 12, 33, 7, false},
};

// One case's fp16 inputs (on both sides), the CPU reference, and a check of a GPU output against it.
struct Problem {
  const Case& c;
  int channels;  // C = heads * head_dim
  size_t q_rows, out_elements;
  AttentionParams shape;  // sizes, strides and scale; pointers unset
  test::DeviceBuffer dq, dkv;
  const __half* kv_base;
  size_t k_offset, v_offset;
  std::vector<float> want;  // CPU output, (q_rows, o_stride)

  Problem(const Case& cs, test::Rng& rng) : c(cs), channels(cs.heads * cs.head_dim) {
    q_rows = size_t(c.batch) * c.q_len;
    const size_t kv_rows = size_t(c.batch) * c.kv_len;
    // Sources as both sides see them (fp16 values): fused (tokens, 3C) = [q | k | v], or (tokens, C)
    // queries and (tokens, 2C) = [k | v].
    const std::vector<float> xq = test::round_to_half(
        rng.normal_vector(q_rows * channels * (c.fused_qkv ? 3 : 1), c.input_stddev));
    const std::vector<float> xkv = c.fused_qkv ? std::vector<float>{}
                                                : test::round_to_half(rng.normal_vector(kv_rows * channels * 2,
                                                                                        c.input_stddev));
    k_offset = c.fused_qkv ? channels : 0;
    v_offset = k_offset + channels;
    shape.batch = c.batch;
    shape.heads = c.heads;
    shape.head_dim = c.head_dim;
    shape.q_len = c.q_len;
    shape.kv_len = c.kv_len;
    shape.q_stride = c.fused_qkv ? 3 * channels : channels;
    shape.k_stride = shape.v_stride = c.fused_qkv ? 3 * channels : 2 * channels;
    shape.o_stride = channels + c.o_pad;
    shape.scale = 1.0f / std::sqrt(float(c.head_dim));
    out_elements = q_rows * shape.o_stride;
    dq = test::to_device_half(xq);
    if (!c.fused_qkv) dkv = test::to_device_half(xkv);
    kv_base = (c.fused_qkv ? dq : dkv).as<__half>();

    // CPU reference on the same values, same layout.
    want.assign(out_elements, 0.0f);
    AttentionParams cpu = shape;
    const float* cpu_kv = c.fused_qkv ? xq.data() : xkv.data();
    cpu.q = xq.data();
    cpu.k = cpu_kv + k_offset;
    cpu.v = cpu_kv + v_offset;
    cpu.o = want.data();
    std::vector<unsigned char> workspace(attention_cpu_workspace_bytes(cpu));
    cpu.workspace = workspace.data();
    cpu.workspace_bytes = workspace.size();
    attention_cpu(cpu);
  }

  // What launch(params with device pointers) writes into a poisoned output, as (q_rows, o_stride).
  template <class Launch>
  std::vector<float> run(cudaStream_t stream, const Launch& launch) const {
    const test::DeviceBuffer dout = test::poisoned_half(out_elements);
    AttentionParams gpu = shape;
    gpu.q = dq.get();
    gpu.k = kv_base + k_offset;
    gpu.v = kv_base + v_offset;
    gpu.o = dout.get();
    launch(gpu);
    RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
    return test::from_device_half(dout, out_elements);
  }

  // The written columns must match the CPU's; the pad columns must still hold the poison. Returns the
  // written columns.
  std::vector<float> check(const std::vector<float>& out) const {
    std::vector<float> ref, got;
    size_t pad_written = 0;
    for (size_t row = 0; row < q_rows; ++row)
      for (int col = 0; col < shape.o_stride; ++col) {
        const size_t i = row * shape.o_stride + col;
        if (col < channels) ref.push_back(want[i]), got.push_back(out[i]);
        else if (!std::isnan(out[i])) ++pad_written;
      }
    EXPECT_LE(test::rel_l2(got, ref), 2e-3) << "max abs diff " << test::max_abs_diff(got, ref);
    EXPECT_EQ(pad_written, 0u) << "elements written past heads * head_dim";
    return got;
  }
};

class AttentionCudaTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionCudaTest, MatchesCpuReference) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Problem problem(GetParam(), rng);
  // The large-grid block shape twice (a race shows up as a difference), then the small-grid one (for
  // head dims up to 64: 128 and 64 query rows per block). The launcher picks the shape from the grid size
  // and ctx.sm_count; 1 and a huge count force each.
  test::TestCudaContext tc;
  auto run_gpu = [&](int sm_count) {
    CudaContext ctx = tc.ctx;
    ctx.sm_count = sm_count;
    return problem.run(ctx.stream, [&](const AttentionParams& p) { attention(p, ctx, FlashKernel::mma_sync); });
  };
  std::vector<float> got[2];
  {
    SCOPED_TRACE("large-grid blocks");
    got[0] = problem.check(run_gpu(1));
    got[1] = problem.check(run_gpu(1));
  }
  {
    SCOPED_TRACE("small-grid blocks");
    problem.check(run_gpu(1 << 20));
  }
  EXPECT_TRUE(got[0] == got[1]) << "two runs on the same inputs differ";
}

// The wgmma/TMA kernel (sm_90a builds on an H100), on every case it takes: head dim 64, any lengths.
TEST_P(AttentionCudaTest, Sm90MatchesCpuReference) {
  RTVD_SKIP_WITHOUT_CUDA();
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Problem problem(GetParam(), rng);
  test::TestCudaContext tc;
  AttentionParams probe = problem.shape;
  probe.q = probe.k = probe.v = probe.o = problem.dq.get();
  std::string why;
  if (!attention_sm90_can_implement(probe, tc.ctx, &why)) GTEST_SKIP() << why;
  std::vector<float> got[2];
  for (auto& g : got) g = problem.check(problem.run(tc.ctx.stream, [&](const AttentionParams& p) { attention_sm90(p, tc.ctx); }));
  EXPECT_TRUE(got[0] == got[1]) << "two runs on the same inputs differ";
  // attention() runs it from 256 keys on.
  if (problem.shape.kv_len >= 256)
    EXPECT_TRUE(problem.check(problem.run(tc.ctx.stream, [&](const AttentionParams& p) { attention(p, tc.ctx); })) == got[0]);
}

#if RTVD_HAS_CUDNN
// cuDNN's fused attention, the library alternative, on the same cases: every head dim of the SD models
// (40, 64, 80, 160) must get an engine; other shapes cuDNN may refuse, by a message naming the shape.
TEST_P(AttentionCudaTest, CudnnMatchesCpuReference) {
  RTVD_SKIP_WITHOUT_CUDA();
  const Case& c = GetParam();
  if (c.head_dim % 8 != 0) GTEST_SKIP() << "cuDNN needs head_dim a multiple of 8";
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Problem problem(c, rng);
  test::TestCudaContext tc;
  test::CudnnHandle cudnn;
  AttentionCudnnPlan plan;
  try {
    plan = make_attention_cudnn_plan(problem.shape, cudnn.handle);
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(cat("head_dim ", c.head_dim)), std::string::npos) << what;
    const bool sd_head_dim = c.head_dim == 40 || c.head_dim == 64 || c.head_dim == 80 || c.head_dim == 160;
    if (sd_head_dim) FAIL() << what;
    GTEST_SKIP() << what;
  }
  ASSERT_LE(plan.workspace_bytes, tc.ctx.workspace_bytes);
  std::vector<float> got[2];
  for (auto& g : got) g = problem.check(problem.run(tc.ctx.stream, [&](const AttentionParams& p) { attention_cudnn(p, plan, tc.ctx); }));
  EXPECT_TRUE(got[0] == got[1]) << "two runs on the same inputs differ";

  AttentionParams other = problem.shape;
  other.q = problem.dq.get();
  other.k = other.v = other.o = problem.dq.get();
  other.kv_len += 1;
  EXPECT_THROW(attention_cudnn(other, plan, tc.ctx), Error) << "a call with other sizes than the plan's";
}
#endif

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionCudaTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

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
}

}  // namespace
}  // namespace rtvd
