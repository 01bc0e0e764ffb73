// GPU ops vs their CPU references: group_norm, layer_norm, linear, the elementwise ops, the conditioning
// ops and the sampler ops (with the fused denoise_blend). Fresh random inputs every run (the seed is in
// the failure message), rounded to fp16 so both sides see the same numbers; every output is poisoned
// with NaN first, so an element the kernel skips fails the check. Each op runs on scaled-down production
// shapes and on odd ones that take the fallback paths (channel counts not divisible by 8, pointers only
// 2-byte aligned, ragged tails).
//
// Tolerances: fp16 outputs rel L2 <= 2e-3. fp32 outputs of the sampler ops use the reference's own
// operations (no FMA) and are held to 1e-6. RGBA8: to_rgba8 must match exactly (same input, same
// rounding); denoise_blend's bytes must equal to_rgba8_cpu of its own prev output exactly and the
// reference's bytes within one step (a 1-ulp difference in prev may cross a rounding boundary).
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>

#include "kernels/denoise.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/embedding.cuh"
#include "kernels/group_norm.cuh"
#include "kernels/layer_norm.cuh"
#include "kernels/linear.cuh"
#include "support/cuda_test_util.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using test::DeviceBuffer;
using test::rel_l2;

constexpr double kHalfTolerance = 2e-3;
constexpr double kExactArithmetic = 1e-6;

// An fp16 tensor: the values fp16 holds (host, for the reference) and a device copy. With `misaligned`
// the device data starts one element into its allocation, so its pointer is only 2-byte aligned.
struct HalfTensor {
  std::vector<float> host;
  DeviceBuffer dev;
  size_t offset = 0;
  void* get() const { return static_cast<__half*>(dev.get()) + offset; }
  std::vector<float> read(size_t n) const {
    std::vector<float> all = test::from_device_half(dev, n + offset);
    return {all.begin() + long(offset), all.end()};
  }
};

HalfTensor half_tensor(std::vector<float> values, bool misaligned = false) {
  HalfTensor t;
  t.host = test::round_to_half(std::move(values));
  t.offset = misaligned ? 1 : 0;
  std::vector<float> padded(t.offset + t.host.size(), 0.0f);
  std::copy(t.host.begin(), t.host.end(), padded.begin() + long(t.offset));
  t.dev = test::to_device_half(padded);
  return t;
}

HalfTensor poisoned_half_tensor(size_t n, bool misaligned = false) {
  HalfTensor t;
  t.offset = misaligned ? 1 : 0;
  t.dev = test::poisoned_half(n + t.offset);
  return t;
}

std::vector<uint8_t> read_bytes(const DeviceBuffer& b, size_t n) {
  std::vector<uint8_t> v(n);
  RTVD_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n, cudaMemcpyDeviceToHost));
  return v;
}

DeviceBuffer poisoned_bytes(size_t n) {
  DeviceBuffer b(n);
  RTVD_CUDA_CHECK(cudaMemset(b.get(), 0xab, n));
  return b;
}

int max_byte_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

class OpsCuda : public testing::Test {
 protected:
  void SetUp() override {
    RTVD_SKIP_WITHOUT_CUDA();
    context_ = std::make_unique<test::TestCudaContext>();
  }
  const CudaContext& ctx() const { return context_->ctx; }
  void sync() const { RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx().stream)); }

  test::Rng rng;

 private:
  std::unique_ptr<test::TestCudaContext> context_;
};

// ---- normalisation ---------------------------------------------------------------------------------

TEST_F(OpsCuda, GroupNormMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int n, hw, c, groups;
    Activation act;
    bool write_y;
    float offset;  // added to the N(0, 1) input: a mean far from zero punishes E[x^2] - E[x]^2
    bool in_place = false;  // y = x
  };
  const Case cases[] = {
      {2, 4096, 320, 32, Activation::Silu, true, 0.0f},   // SD 64x64 level: 32 groups of 10 channels
      {2, 256, 1280, 32, Activation::Silu, true, 0.0f},   // 16x16 level
      {2, 1024, 640, 32, Activation::None, false, 0.0f},  // statistics only: the conv prologue pre-pass
      {1, 64, 2560, 32, Activation::Silu, true, 0.0f},    // widest skip concat
      {1, 4097, 320, 32, Activation::None, true, 0.0f},   // ragged last chunk
      {3, 1, 64, 32, Activation::None, true, 0.0f},       // a single pixel
      {2, 33, 4, 2, Activation::Silu, true, 0.0f},        // c = 4: 2-channel accesses
      {1, 100, 30, 3, Activation::None, true, 0.0f},      // c % 8 != 0
      {2, 77, 15, 5, Activation::Silu, true, 0.0f},       // odd c: scalar accesses
      {2, 512, 320, 32, Activation::None, true, 50.0f},   // |mean| = 50 std
      {2, 4096, 320, 32, Activation::Silu, true, 3.0f, true},  // in place: x read after others wrote y
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("n ", tc.n, " hw ", tc.hw, " c ", tc.c, " groups ", tc.groups, " y ", tc.write_y, tc.in_place ? " in place" : ""));
    const size_t size = size_t(tc.n) * tc.hw * tc.c, stats_size = size_t(tc.n) * tc.groups * 2;
    std::vector<float> xv = rng.normal_vector(size);
    for (float& v : xv) v += tc.offset;
    const HalfTensor x = half_tensor(std::move(xv));
    std::vector<float> gamma = rng.vector(tc.c, 0.5f, 1.5f), beta = rng.vector(tc.c, -0.5f, 0.5f);
    const DeviceBuffer gamma_d = test::to_device_float(gamma), beta_d = test::to_device_float(beta);
    const DeviceBuffer y = test::poisoned_half(size), stats = test::poisoned_float(stats_size);

    GroupNormParams p;
    p.x = x.get();
    p.y = tc.in_place ? x.get() : tc.write_y ? y.get() : nullptr;
    p.stats = stats.as<float>();
    p.gamma = tc.write_y ? gamma_d.as<float>() : nullptr;  // statistics alone need no affine
    p.beta = tc.write_y ? beta_d.as<float>() : nullptr;
    p.n = tc.n, p.hw = tc.hw, p.c = tc.c, p.groups = tc.groups, p.act = tc.act;
    group_norm(p, ctx());
    sync();

    std::vector<float> y_ref(size), stats_ref(stats_size);
    GroupNormParams r = p;
    r.x = x.host.data();
    r.y = tc.write_y ? y_ref.data() : nullptr;
    r.stats = stats_ref.data();
    r.gamma = gamma.data();
    r.beta = beta.data();
    group_norm_cpu(r);
    EXPECT_LE(rel_l2(test::from_device_float(stats, stats_size), stats_ref), 1e-4);
    if (tc.write_y) EXPECT_LE(rel_l2(tc.in_place ? x.read(size) : test::from_device_half(y, size), y_ref), kHalfTolerance);
  }
}

TEST_F(OpsCuda, LayerNormMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int rows, c;
    float offset;
    bool misaligned;
  };
  const Case cases[] = {
      {2048, 320, 0.0f, false},  // transformer at 32x32 (scaled down from 8192 rows)
      {154, 1024, 0.0f, false},  // 1024-wide rows
      {77, 768, 0.0f, false},
      {33, 1280, 0.0f, false},   // widest row held in registers
      {9, 1288, 0.0f, false},    // past the register path: fallback
      {17, 100, 0.0f, false},    // c % 8 != 0: fallback
      {3, 7, 0.0f, false},
      {64, 320, 0.0f, true},     // 2-byte aligned rows: fallback
      {128, 640, 20.0f, false},  // mean far from zero
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("rows ", tc.rows, " c ", tc.c, tc.misaligned ? " misaligned" : ""));
    const size_t size = size_t(tc.rows) * tc.c;
    std::vector<float> xv = rng.normal_vector(size, 2.0f);
    for (float& v : xv) v += tc.offset;
    const HalfTensor x = half_tensor(std::move(xv), tc.misaligned);
    const HalfTensor y = poisoned_half_tensor(size, tc.misaligned);
    std::vector<float> gamma = rng.vector(tc.c, 0.5f, 1.5f), beta = rng.vector(tc.c, -0.5f, 0.5f);
    const DeviceBuffer gamma_d = test::to_device_float(gamma), beta_d = test::to_device_float(beta);

    LayerNormParams p;
    p.x = x.get();
    p.y = y.get();
    p.gamma = gamma_d.as<float>();
    p.beta = beta_d.as<float>();
    p.rows = tc.rows, p.c = tc.c;
    layer_norm(p, ctx());
    sync();

    std::vector<float> y_ref(size);
    LayerNormParams r = p;
    r.x = x.host.data();
    r.y = y_ref.data();
    r.gamma = gamma.data();
    r.beta = beta.data();
    layer_norm_cpu(r);
    EXPECT_LE(rel_l2(y.read(size), y_ref), kHalfTolerance);
  }
}

// ---- linear -------------------------------------------------------------------------------------------

TEST_F(OpsCuda, LinearMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  enum class Residual { None, Separate, InPlace };
  struct Case {
    int m, n, k;
    bool bias;
    Residual residual;
    Activation act;
    bool misaligned;  // x starts 2 bytes into its allocation
  };
  const Case cases[] = {
      {154, 320, 1024, false, Residual::None, Activation::None, false},     // cross-attention to_k / to_v
      {77, 1280, 1024, true, Residual::None, Activation::None, false},
      {2048, 320, 320, true, Residual::Separate, Activation::None, false},  // to_out + skip (scaled down)
      {512, 2560, 320, true, Residual::None, Activation::None, false},      // GEGLU projection
      {512, 320, 1280, true, Residual::Separate, Activation::None, false},  // feed-forward out + skip
      {256, 320, 320, true, Residual::InPlace, Activation::None, false},    // h += proj(h), y aliases residual
      {2, 1280, 320, true, Residual::None, Activation::Silu, false},        // time embedding linear_1: few rows, fallback
      {64, 64, 64, true, Residual::Separate, Activation::Silu, false},      // SiLU pass after cuBLASLt
      {64, 64, 64, false, Residual::None, Activation::None, false},         // no epilogue at all
      {33, 17, 40, true, Residual::Separate, Activation::None, false},      // n % 8 != 0: fallback
      {33, 24, 20, true, Residual::None, Activation::Silu, false},          // k % 8 != 0: fallback
      {7, 5, 3, false, Residual::Separate, Activation::Silu, false},
      {100, 64, 64, true, Residual::InPlace, Activation::None, false},      // m not a tile multiple
      {128, 64, 64, true, Residual::Separate, Activation::None, true},      // misaligned x: fallback
      {8192, 320, 320, true, Residual::Separate, Activation::None, false},  // SD 64x64 to_out + skip
  };
  // Every case through cuBLASLt's first choice and then through each algorithm linear_algorithms() offers
  // for it (the candidates `auto` times), each run on a fresh y; a name that is no algorithm runs the
  // first choice.
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("m ", tc.m, " n ", tc.n, " k ", tc.k, " bias ", tc.bias, " residual ", int(tc.residual),
                     " act ", int(tc.act), tc.misaligned ? " misaligned" : ""));
    const size_t out_size = size_t(tc.m) * tc.n;
    const float w_scale = 1.0f / std::sqrt(float(tc.k));
    const HalfTensor x = half_tensor(rng.vector(size_t(tc.m) * tc.k), tc.misaligned);
    const HalfTensor w = half_tensor(rng.vector(size_t(tc.n) * tc.k, -w_scale, w_scale));
    std::vector<float> bias = rng.vector(tc.n);
    const DeviceBuffer bias_d = test::to_device_float(bias);
    const HalfTensor residual = half_tensor(rng.vector(out_size));
    // In place, y starts as the residual; otherwise it starts poisoned.
    HalfTensor y;
    auto fresh_y = [&] { y = tc.residual == Residual::InPlace ? half_tensor(residual.host) : poisoned_half_tensor(out_size); };
    fresh_y();

    LinearParams p;
    p.x = x.get();
    p.w = w.get();
    p.bias = tc.bias ? bias_d.as<float>() : nullptr;
    p.m = tc.m, p.n = tc.n, p.k = tc.k, p.act = tc.act;
    auto run = [&](const std::string& algorithm) {
      fresh_y();
      p.residual = tc.residual == Residual::Separate ? residual.get() : tc.residual == Residual::InPlace ? y.get() : nullptr;
      p.y = y.get();
      linear(p, ctx(), algorithm);
      sync();
      return y.read(out_size);
    };
    const std::vector<float> first_choice = run("");

    std::vector<float> y_ref = tc.residual == Residual::InPlace ? residual.host : std::vector<float>(out_size);
    LinearParams r = p;
    r.x = x.host.data();
    r.w = w.host.data();
    r.bias = tc.bias ? bias.data() : nullptr;
    r.residual = tc.residual == Residual::Separate ? residual.host.data()
                 : tc.residual == Residual::InPlace ? y_ref.data()
                                                    : nullptr;
    r.y = y_ref.data();
    linear_cpu(r);
    EXPECT_LE(rel_l2(first_choice, y_ref), kHalfTolerance);

    const std::vector<std::string> algorithms = linear_algorithms(p, ctx());
    const bool fallback = tc.m <= 8 || tc.n % 8 || tc.k % 8 || tc.misaligned;
    EXPECT_EQ(algorithms.empty(), fallback) << algorithms.size() << " algorithms";
    for (size_t i = 0; i < algorithms.size(); ++i) {
      SCOPED_TRACE(cat("algorithm ", i, " of ", algorithms.size()));
      EXPECT_LE(rel_l2(run(algorithms[i]), y_ref), kHalfTolerance);
    }
    EXPECT_EQ(run("cuBLASLt 00"), first_choice) << "a name that is no algorithm runs the first choice";
  }
}

TEST_F(OpsCuda, LinearRejectsResidualAliasUnderActivation) {
  const DeviceBuffer buffer = test::poisoned_half(64 * 64);
  LinearParams p;
  p.x = p.w = p.residual = buffer.get();
  p.y = buffer.get();
  p.m = p.n = p.k = 64;
  p.act = Activation::Silu;
  EXPECT_THROW(linear(p, ctx()), Error);
}

// ---- elementwise ----------------------------------------------------------------------------------

TEST_F(OpsCuda, GegluMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int rows, f;
    bool misaligned;
  };
  const Case cases[] = {{1024, 1280, false}, {77, 40, false}, {33, 20, false}, {5, 7, false}, {64, 64, true}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("rows ", tc.rows, " f ", tc.f, tc.misaligned ? " misaligned" : ""));
    const size_t out_size = size_t(tc.rows) * tc.f;
    const HalfTensor x = half_tensor(rng.normal_vector(2 * out_size, 2.0f), tc.misaligned);
    const HalfTensor y = poisoned_half_tensor(out_size, tc.misaligned);
    GegluParams p;
    p.x = x.get();
    p.y = y.get();
    p.rows = tc.rows, p.f = tc.f;
    geglu(p, ctx());
    sync();
    std::vector<float> y_ref(out_size);
    GegluParams r = p;
    r.x = x.host.data();
    r.y = y_ref.data();
    geglu_cpu(r);
    EXPECT_LE(rel_l2(y.read(out_size), y_ref), kHalfTolerance);
  }
}

TEST_F(OpsCuda, SiluMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int64_t count;
    bool misaligned;
  };
  const Case cases[] = {{1 << 20, false}, {1000003, false}, {7, false}, {4096, true}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("count ", tc.count, tc.misaligned ? " misaligned" : ""));
    const HalfTensor x = half_tensor(rng.normal_vector(size_t(tc.count), 3.0f), tc.misaligned);
    const HalfTensor y = poisoned_half_tensor(size_t(tc.count), tc.misaligned);
    SiluParams p;
    p.x = x.get();
    p.y = y.get();
    p.count = tc.count;
    silu(p, ctx());
    sync();
    std::vector<float> y_ref(size_t(tc.count));
    SiluParams r = p;
    r.x = x.host.data();
    r.y = y_ref.data();
    silu_cpu(r);
    EXPECT_LE(rel_l2(y.read(size_t(tc.count)), y_ref), kHalfTolerance);
  }
}

// Upsampling and concat only move fp16 values: the result must be exact.
TEST_F(OpsCuda, Upsample2xMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int n, h, w, c;
    bool misaligned;
  };
  const Case cases[] = {{2, 16, 16, 1280, false}, {1, 32, 32, 320, false}, {2, 3, 5, 4, false},
                        {1, 1, 1, 8, false},      {1, 4, 4, 16, true}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("n ", tc.n, " h ", tc.h, " w ", tc.w, " c ", tc.c, tc.misaligned ? " misaligned" : ""));
    const size_t in_size = size_t(tc.n) * tc.h * tc.w * tc.c, out_size = 4 * in_size;
    const HalfTensor x = half_tensor(rng.vector(in_size), tc.misaligned);
    const HalfTensor y = poisoned_half_tensor(out_size, tc.misaligned);
    Upsample2xParams p;
    p.x = x.get();
    p.y = y.get();
    p.n = tc.n, p.h = tc.h, p.w = tc.w, p.c = tc.c;
    upsample2x(p, ctx());
    sync();
    std::vector<float> y_ref(out_size);
    Upsample2xParams r = p;
    r.x = x.host.data();
    r.y = y_ref.data();
    upsample2x_cpu(r);
    EXPECT_EQ(rel_l2(y.read(out_size), y_ref), 0.0);
  }
}

TEST_F(OpsCuda, ConcatMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int64_t pixels;
    int ca, cb;
    bool misaligned;
  };
  const Case cases[] = {{512, 1280, 1280, false}, {1024, 640, 320, false}, {77, 4, 12, false},
                        {10, 8, 3, false},        {16, 8, 8, true}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("pixels ", tc.pixels, " ca ", tc.ca, " cb ", tc.cb, tc.misaligned ? " misaligned" : ""));
    const size_t out_size = size_t(tc.pixels) * (tc.ca + tc.cb);
    const HalfTensor a = half_tensor(rng.vector(size_t(tc.pixels) * tc.ca), tc.misaligned);
    const HalfTensor b = half_tensor(rng.vector(size_t(tc.pixels) * tc.cb));
    const HalfTensor y = poisoned_half_tensor(out_size);
    ConcatParams p;
    p.a = a.get();
    p.b = b.get();
    p.y = y.get();
    p.pixels = tc.pixels, p.ca = tc.ca, p.cb = tc.cb;
    concat(p, ctx());
    sync();
    std::vector<float> y_ref(out_size);
    ConcatParams r = p;
    r.a = a.host.data();
    r.b = b.host.data();
    r.y = y_ref.data();
    concat_cpu(r);
    EXPECT_EQ(rel_l2(y.read(out_size), y_ref), 0.0);
  }
}

// ---- conditioning ---------------------------------------------------------------------------------

TEST_F(OpsCuda, TimestepEmbeddingMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int n, dim;
    float timestep;
    bool flip;
    float shift;
  };
  const Case cases[] = {{2, 320, 999.0f, true, 0.0f},
                        {1, 321, 17.5f, false, 1.0f},  // odd dim: zero pad
                        {3, 256, 0.0f, true, 0.0f},
                        {2, 1280, rng.uniform(0.0f, 1000.0f), false, 1.0f}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("n ", tc.n, " dim ", tc.dim, " t ", tc.timestep, " flip ", tc.flip, " shift ", tc.shift));
    const size_t size = size_t(tc.n) * tc.dim;
    const DeviceBuffer y = test::poisoned_half(size);
    TimestepEmbeddingParams p;
    p.y = y.get();
    p.n = tc.n, p.dim = tc.dim, p.timestep = tc.timestep, p.flip_sin_to_cos = tc.flip, p.freq_shift = tc.shift;
    timestep_embedding(p, ctx());
    sync();
    std::vector<float> y_ref(size);
    TimestepEmbeddingParams r = p;
    r.y = y_ref.data();
    timestep_embedding_cpu(r);
    EXPECT_LE(rel_l2(test::from_device_half(y, size), y_ref), kHalfTolerance);
  }
}

TEST_F(OpsCuda, EmbeddingMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int n, rows, dim;
    bool accumulate;
  };
  const Case cases[] = {{5, 10, 1280, false}, {5, 10, 1280, true}, {3, 4, 13, true}, {6, 3, 8, false}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("n ", tc.n, " rows ", tc.rows, " dim ", tc.dim, " accumulate ", tc.accumulate));
    const size_t size = size_t(tc.n) * tc.dim;
    const HalfTensor table = half_tensor(rng.vector(size_t(tc.rows) * tc.dim));
    std::vector<int32_t> ids(tc.n);
    for (int32_t& id : ids) id = rng.integer(0, tc.rows - 1);
    DeviceBuffer ids_d(ids.size() * sizeof(int32_t));
    RTVD_CUDA_CHECK(cudaMemcpy(ids_d.get(), ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    // Accumulating adds to what y holds, so y starts random; otherwise poisoned.
    const HalfTensor y = tc.accumulate ? half_tensor(rng.vector(size)) : poisoned_half_tensor(size);
    EmbeddingParams p;
    p.table = table.get();
    p.ids = ids_d.as<int32_t>();
    p.y = y.get();
    p.n = tc.n, p.rows = tc.rows, p.dim = tc.dim, p.accumulate = tc.accumulate;
    embedding(p, ctx());
    sync();
    std::vector<float> y_ref = tc.accumulate ? y.host : std::vector<float>(size);
    EmbeddingParams r = p;
    r.table = table.host.data();
    r.ids = ids.data();
    r.y = y_ref.data();
    embedding_cpu(r);
    EXPECT_LE(rel_l2(y.read(size), y_ref), kHalfTolerance);
  }
}

TEST_F(OpsCuda, EmbeddingOutOfRangeIdWritesNan) {
  const HalfTensor table = half_tensor(rng.vector(4 * 8));
  const int32_t ids[2] = {1, 4};
  DeviceBuffer ids_d(sizeof(ids));
  RTVD_CUDA_CHECK(cudaMemcpy(ids_d.get(), ids, sizeof(ids), cudaMemcpyHostToDevice));
  const HalfTensor y = half_tensor(std::vector<float>(2 * 8, 0.0f));
  EmbeddingParams p;
  p.table = table.get();
  p.ids = ids_d.as<int32_t>();
  p.y = y.get();
  p.n = 2, p.rows = 4, p.dim = 8;
  embedding(p, ctx());
  sync();
  const std::vector<float> out = y.read(16);
  EXPECT_TRUE(test::all_finite({out.begin(), out.begin() + 8}));
  EXPECT_TRUE(std::all_of(out.begin() + 8, out.end(), [](float v) { return std::isnan(v); }));
}

TEST_F(OpsCuda, FilmMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int n, c, proj_stride, proj_offset;
    bool with_scale, base_scale, base_bias;
  };
  const Case cases[] = {{2, 320, 3000, 640, true, true, true},     // BatchNorm block: [g | b] slice
                        {2, 1280, 1280, 0, false, false, true},    // GroupNorm block: conv bias as t
                        {3, 17, 40, 3, true, false, false},        // odd sizes, no base vectors
                        {1, 9, 9, 0, false, false, false}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("n ", tc.n, " c ", tc.c, " with_scale ", tc.with_scale));
    const HalfTensor proj = half_tensor(rng.vector(size_t(tc.n) * tc.proj_stride));
    std::vector<float> base_scale = rng.vector(tc.c, 0.5f, 1.5f), base_bias = rng.vector(tc.c);
    const DeviceBuffer base_scale_d = test::to_device_float(base_scale), base_bias_d = test::to_device_float(base_bias);
    const size_t size = size_t(tc.n) * tc.c;
    const DeviceBuffer scale = test::poisoned_float(size), bias = test::poisoned_float(size);
    FilmParams p;
    p.proj = proj.get();
    p.proj_stride = tc.proj_stride, p.proj_offset = tc.proj_offset;
    p.base_scale = tc.base_scale ? base_scale_d.as<float>() : nullptr;
    p.base_bias = tc.base_bias ? base_bias_d.as<float>() : nullptr;
    p.scale = tc.with_scale ? scale.as<float>() : nullptr;
    p.bias = bias.as<float>();
    p.n = tc.n, p.c = tc.c, p.with_scale = tc.with_scale;
    film(p, ctx());
    sync();
    std::vector<float> scale_ref(size), bias_ref(size);
    FilmParams r = p;
    r.proj = proj.host.data();
    r.base_scale = tc.base_scale ? base_scale.data() : nullptr;
    r.base_bias = tc.base_bias ? base_bias.data() : nullptr;
    r.scale = tc.with_scale ? scale_ref.data() : nullptr;
    r.bias = bias_ref.data();
    film_cpu(r);
    // fp32 outputs of identical fp16 inputs: only a contracted multiply-add may differ (1 ulp).
    EXPECT_LE(rel_l2(test::from_device_float(bias, size), bias_ref), kExactArithmetic);
    if (tc.with_scale) EXPECT_LE(rel_l2(test::from_device_float(scale, size), scale_ref), kExactArithmetic);
  }
}

// ---- sampler --------------------------------------------------------------------------------------

TEST_F(OpsCuda, GuidanceStepMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int64_t count;
    int batch;
    bool model_in;
  };
  const Case cases[] = {{4 * 64 * 64, 2, true}, {1001, 1, true}, {4096, 2, false}, {1003, 2, true}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("count ", tc.count, " batch ", tc.batch, " model_in ", tc.model_in));
    const size_t count = size_t(tc.count), batched = count * tc.batch;
    const HalfTensor v = half_tensor(rng.normal_vector(batched));
    std::vector<float> x_host = rng.normal_vector(count);
    const DeviceBuffer x = test::to_device_float(x_host);
    const DeviceBuffer model_in = test::poisoned_half(batched);
    GuidanceStepParams p;
    p.v = v.get();
    p.x = x.as<float>();
    p.model_in = tc.model_in ? model_in.get() : nullptr;
    p.count = tc.count, p.batch = tc.batch, p.guidance = rng.uniform(1.0f, 9.0f), p.dt = rng.uniform(-0.5f, 0.0f);
    guidance_step(p, ctx());
    sync();
    std::vector<float> model_in_ref(batched);
    GuidanceStepParams r = p;
    r.v = v.host.data();
    r.x = x_host.data();
    r.model_in = tc.model_in ? model_in_ref.data() : nullptr;
    guidance_step_cpu(r);
    EXPECT_LE(rel_l2(test::from_device_float(x, count), x_host), kExactArithmetic);
    if (tc.model_in)
      EXPECT_LE(rel_l2(test::from_device_half(model_in, batched), test::round_to_half(model_in_ref)), kExactArithmetic);
  }
}

TEST_F(OpsCuda, TemporalBlendMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int64_t count;
    bool first;
  };
  const Case cases[] = {{12345, false}, {4096, true}, {4099, false}, {3, true}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("count ", tc.count, " first ", tc.first));
    const size_t count = size_t(tc.count);
    std::vector<float> x = rng.vector(count), prev = tc.first ? test::poisoned(count) : rng.vector(count);
    const DeviceBuffer x_d = test::to_device_float(x), prev_d = test::to_device_float(prev);
    const DeviceBuffer out = test::poisoned_float(count);
    TemporalBlendParams p;
    p.x = x_d.as<float>();
    p.prev = prev_d.as<float>();
    p.out = out.as<float>();
    p.count = tc.count, p.blend = rng.uniform(0.0f, 0.9f), p.first = tc.first;
    temporal_blend(p, ctx());
    sync();
    std::vector<float> out_ref(count);
    TemporalBlendParams r = p;
    r.x = x.data();
    r.prev = prev.data();
    r.out = out_ref.data();
    temporal_blend_cpu(r);
    EXPECT_LE(rel_l2(test::from_device_float(out, count), out_ref), kExactArithmetic);
    EXPECT_LE(rel_l2(test::from_device_float(prev_d, count), prev), kExactArithmetic);
  }
}

TEST_F(OpsCuda, ToRgba8MatchesCpuExactly) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int h, w, c;
  };
  const Case cases[] = {{64, 64, 3}, {17, 9, 1}, {5, 3, 3}, {1, 1, 1}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(cat("h ", tc.h, " w ", tc.w, " c ", tc.c));
    const size_t pixels = size_t(tc.h) * tc.w;
    std::vector<float> x = rng.vector(pixels * tc.c, -1.2f, 1.2f);  // some clamp at both ends
    const DeviceBuffer x_d = test::to_device_float(x);
    const DeviceBuffer rgba = poisoned_bytes(4 * pixels);
    ToRgba8Params p;
    p.x = x_d.as<float>();
    p.rgba = rgba.as<uint8_t>();
    p.h = tc.h, p.w = tc.w, p.c = tc.c;
    to_rgba8(p, ctx());
    sync();
    std::vector<uint8_t> ref(4 * pixels);
    ToRgba8Params r = p;
    r.x = x.data();
    r.rgba = ref.data();
    to_rgba8_cpu(r);
    EXPECT_EQ(read_bytes(rgba, 4 * pixels), ref);
  }
}

TEST_F(OpsCuda, DenoiseBlendMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int h, w, c, batch;
    bool first, rgba;
  };
  const Case cases[] = {
      {64, 64, 3, 2, false, true},   // pixel-space frame, scaled down: two whole block tiles
      {80, 80, 3, 2, false, true},   // three tiles and 256 pixels after them
      {17, 9, 1, 1, true, true},     // grey, batch 1, first frame (prev unread)
      {96, 70, 1, 1, true, true},    // grey: a tile and a tail
      {32, 32, 4, 2, false, false},  // latent: no RGBA8
      {48, 48, 4, 2, false, false},  // latent: a tile and a tail
      {33, 7, 3, 2, false, true},    // count % 4 != 0: per-pixel path
      {8, 8, 3, 2, true, true},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(
        cat("h ", tc.h, " w ", tc.w, " c ", tc.c, " batch ", tc.batch, " first ", tc.first, " rgba ", tc.rgba));
    const size_t pixels = size_t(tc.h) * tc.w, count = pixels * tc.c;
    const HalfTensor v = half_tensor(rng.normal_vector(count * tc.batch));
    std::vector<float> x = rng.normal_vector(count);
    std::vector<float> prev = tc.first ? test::poisoned(count) : rng.vector(count);
    const DeviceBuffer x_d = test::to_device_float(x), prev_d = test::to_device_float(prev);
    const DeviceBuffer rgba = poisoned_bytes(4 * pixels);
    DenoiseBlendParams p;
    p.v = v.get();
    p.x = x_d.as<float>();
    p.prev = prev_d.as<float>();
    p.rgba = tc.rgba ? rgba.as<uint8_t>() : nullptr;
    p.h = tc.h, p.w = tc.w, p.c = tc.c, p.batch = tc.batch;
    p.guidance = rng.uniform(1.0f, 9.0f), p.dt = rng.uniform(-1.0f, 0.0f), p.blend = rng.uniform(0.0f, 0.9f);
    p.first = tc.first;
    denoise_blend(p, ctx());
    sync();
    std::vector<uint8_t> rgba_ref(4 * pixels);
    DenoiseBlendParams r = p;
    r.v = v.host.data();
    r.x = x.data();
    r.prev = prev.data();
    r.rgba = tc.rgba ? rgba_ref.data() : nullptr;
    denoise_blend_cpu(r);
    const std::vector<float> prev_gpu = test::from_device_float(prev_d, count);
    EXPECT_LE(rel_l2(test::from_device_float(x_d, count), x), kExactArithmetic);
    EXPECT_LE(rel_l2(prev_gpu, prev), kExactArithmetic);
    if (!tc.rgba) continue;
    const std::vector<uint8_t> bytes = read_bytes(rgba, 4 * pixels);
    std::vector<uint8_t> own(4 * pixels);
    ToRgba8Params convert;
    convert.x = prev_gpu.data();
    convert.rgba = own.data();
    convert.h = tc.h, convert.w = tc.w, convert.c = tc.c;
    to_rgba8_cpu(convert);
    EXPECT_EQ(bytes, own);
    EXPECT_LE(max_byte_diff(bytes, rgba_ref), 1);
  }
}

}  // namespace
}  // namespace rtvd
