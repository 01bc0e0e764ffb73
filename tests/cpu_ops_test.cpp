// The CPU ops against naive definitions written here from the math alone: plain loops, float64
// accumulation, fresh random inputs every run, outputs poisoned with NaN so that every element must be
// written. Tolerance rel_l2 <= 1e-5 (fp32 BLAS against float64) unless a case says why not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/conv2d.h"
#include "kernels/denoise.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/error.h"
#include "kernels/group_norm.h"
#include "kernels/layer_norm.h"
#include "kernels/linear.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using test::poisoned;
using test::rel_l2;

constexpr double kTolerance = 1e-5;

double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }
double act_ref(double x, Activation a) { return a == Activation::Silu ? silu_ref(x) : x; }

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// Workspace of the requested size, poisoned too: an op must not read scratch it did not write.
std::vector<float> workspace_for(size_t bytes) {
  return poisoned((bytes + sizeof(float) - 1) / sizeof(float));
}

// ---------------------------------------------------------------------------------------------------
// conv2d

struct ConvCase {
  int n, h, w, c_in, c_out, k, stride, pad;
  int gn_groups = 0;  // > 0: GroupNorm+SiLU prologue
  bool scale = false, bias = false, per_image = false, residual = false;
  Activation act = Activation::None;
};

std::string describe(const ConvCase& c) {
  return cat("conv n", c.n, " ", c.h, "x", c.w, " ", c.c_in, "->", c.c_out, " k", c.k, " s", c.stride, " p",
             c.pad, " gn", c.gn_groups, " scale", c.scale, " bias", c.bias, " per_image", c.per_image,
             " residual", c.residual, " silu", c.act == Activation::Silu);
}

struct ConvData {
  ConvCase shape;
  int h_out, w_out;
  std::vector<float> x, w, scale, bias, residual, stats, gamma, beta;

  ConvData(const ConvCase& c, test::Rng& rng) : shape(c) {
    h_out = conv2d_out_size(c.h, c.k, c.stride, c.pad);
    w_out = conv2d_out_size(c.w, c.k, c.stride, c.pad);
    const size_t rows = c.per_image ? c.n : 1;
    x = rng.vector(size_t(c.n) * c.h * c.w * c.c_in);
    w = rng.vector(size_t(c.c_out) * c.k * c.k * c.c_in);
    if (c.scale) scale = rng.vector(rows * c.c_out, 0.5f, 1.5f);
    if (c.bias) bias = rng.vector(rows * c.c_out);
    if (c.residual) residual = rng.vector(size_t(c.n) * h_out * w_out * c.c_out);
    if (c.gn_groups) {
      for (int i = 0; i < c.n * c.gn_groups; ++i) {
        stats.push_back(rng.uniform(-0.5f, 0.5f));  // mean
        stats.push_back(rng.uniform(0.5f, 2.0f));   // rstd
      }
      gamma = rng.vector(c.c_in, 0.5f, 1.5f);
      beta = rng.vector(c.c_in);
    }
  }

  Conv2dParams params() const {
    const ConvCase& c = shape;
    Conv2dParams p;
    p.x = x.data();
    p.weight = w.data();
    p.residual = c.residual ? residual.data() : nullptr;
    p.scale = c.scale ? scale.data() : nullptr;
    p.bias = c.bias ? bias.data() : nullptr;
    p.scale_batch_stride = c.per_image ? c.c_out : 0;
    p.bias_batch_stride = c.per_image ? c.c_out : 0;
    p.gn_stats = c.gn_groups ? stats.data() : nullptr;
    p.gn_gamma = c.gn_groups ? gamma.data() : nullptr;
    p.gn_beta = c.gn_groups ? beta.data() : nullptr;
    p.gn_groups = c.gn_groups;
    p.n = c.n, p.h = c.h, p.w = c.w, p.c_in = c.c_in, p.c_out = c.c_out;
    p.kh = c.k, p.kw = c.k, p.stride = c.stride, p.pad = c.pad;
    p.h_out = h_out, p.w_out = w_out;
    p.act = c.act;
    return p;
  }

  // pre(x) of one input element, per the header: GroupNorm with the given statistics, affine, SiLU.
  double pre(int img, int iy, int ix, int ci) const {
    const ConvCase& c = shape;
    const double v = x[((size_t(img) * c.h + iy) * c.w + ix) * c.c_in + ci];
    if (!c.gn_groups) return v;
    const int g = ci / (c.c_in / c.gn_groups);
    const double mean = stats[(img * c.gn_groups + g) * 2], rstd = stats[(img * c.gn_groups + g) * 2 + 1];
    return silu_ref((v - mean) * rstd * gamma[ci] + beta[ci]);
  }

  // Direct convolution. A padded tap contributes 0 (the definition); pad_with_pre_of_zero makes it
  // contribute pre(0) instead, the answer of an implementation that pads before normalising.
  std::vector<float> reference(bool pad_with_pre_of_zero = false) const {
    const ConvCase& c = shape;
    std::vector<double> y(size_t(c.n) * h_out * w_out * c.c_out);
    for (int img = 0; img < c.n; ++img)
      for (int oy = 0; oy < h_out; ++oy)
        for (int ox = 0; ox < w_out; ++ox)
          for (int co = 0; co < c.c_out; ++co) {
            double acc = 0;
            for (int ky = 0; ky < c.k; ++ky)
              for (int kx = 0; kx < c.k; ++kx)
                for (int ci = 0; ci < c.c_in; ++ci) {
                  const int iy = oy * c.stride - c.pad + ky, ix = ox * c.stride - c.pad + kx;
                  const bool inside = iy >= 0 && iy < c.h && ix >= 0 && ix < c.w;
                  double v = inside ? pre(img, iy, ix, ci) : 0.0;
                  if (!inside && pad_with_pre_of_zero) {
                    const int g = ci / (c.c_in / c.gn_groups);
                    const double mean = stats[(img * c.gn_groups + g) * 2];
                    const double rstd = stats[(img * c.gn_groups + g) * 2 + 1];
                    v = silu_ref((0.0 - mean) * rstd * gamma[ci] + beta[ci]);
                  }
                  acc += v * w[((size_t(co) * c.k + ky) * c.k + kx) * c.c_in + ci];
                }
            const size_t row = c.per_image ? img : 0;
            if (c.scale) acc *= scale[row * c.c_out + co];
            if (c.bias) acc += bias[row * c.c_out + co];
            acc = act_ref(acc, c.act);
            const size_t out = ((size_t(img) * h_out + oy) * w_out + ox) * c.c_out + co;
            if (c.residual) acc += residual[out];
            y[out] = acc;
          }
    return to_float(y);
  }

  std::vector<float> run() const {
    Conv2dParams p = params();
    std::vector<float> y = poisoned(size_t(shape.n) * h_out * w_out * shape.c_out);
    std::vector<float> ws = workspace_for(conv2d_cpu_workspace_bytes(p));
    p.y = y.data();
    p.workspace = ws.data();
    p.workspace_bytes = conv2d_cpu_workspace_bytes(p);
    conv2d_cpu(p);
    return y;
  }
};

TEST(CpuOps, Conv2dMatchesDirectConvolution) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Activation silu = Activation::Silu;
  const std::vector<ConvCase> cases = {
      // first layers: 3 and 4 input channels
      {1, 7, 5, 3, 8, 3, 1, 1},
      {2, 8, 8, 4, 16, 3, 1, 1, 0, false, true},
      // 1x1: the no-im2col path, and with stride 2 / a prologue (both need the gather)
      {2, 7, 5, 16, 24, 1, 1, 0},
      {2, 7, 5, 16, 24, 1, 1, 0, 0, true, true, true, true, silu},
      {2, 7, 5, 16, 8, 1, 2, 0, 0, false, true},
      {2, 6, 6, 32, 16, 1, 1, 0, 8, false, true},
      // 3x3 stride 1 and 2, pad 0 and 1, odd sizes, every epilogue part
      {2, 7, 5, 16, 12, 3, 1, 0, 0, false, false, false, true},
      {2, 9, 7, 8, 10, 3, 2, 1, 0, true, true, false, false, silu},
      {2, 8, 6, 12, 12, 3, 2, 0},
      {2, 7, 5, 16, 20, 3, 1, 1, 0, true, true, true, true, silu},  // FiLM rows per image
      // GroupNorm+SiLU prologue, 1 and 2 channels per group, with and without the epilogue
      {2, 7, 5, 32, 16, 3, 1, 1, 32, false, true, false, false},
      {2, 8, 8, 32, 16, 3, 1, 1, 16, true, true, true, true, silu},
      {2, 9, 9, 24, 8, 3, 2, 1, 8},
      // 5x5 kernel
      {1, 6, 7, 5, 3, 5, 1, 2},
      // more output channels than pixels: the threads split the GEMM's columns instead of its rows
      {2, 4, 4, 128, 40, 3, 2, 1, 32, true, true, true, true, silu},
      // a larger GEMM; and K 9216 at 2 x 575 pixels, where im2col runs in three chunks (of 384 rows)
      // whose boundaries fall inside the images
      {2, 24, 20, 128, 16, 3, 1, 1, 32, false, true, true, true, silu},
      {2, 23, 25, 1024, 4, 3, 1, 1, 0, true, true, true, true},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const ConvData data(c, rng);
    EXPECT_LE(rel_l2(data.run(), data.reference()), kTolerance);
  }
}

// The prologue normalises the input; the zero padding comes after it, as in PyTorch, where the conv pads
// its own (already normalised) input. With beta = 1, silu(gn(0)) is far from 0, so padding the raw
// input with zeros (and normalising the pads) lands on a clearly different answer.
TEST(CpuOps, Conv2dPadsTheNormalisedInputWithZeros) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  ConvData data({2, 5, 7, 8, 4, 3, 1, 1, 4}, rng);
  std::fill(data.beta.begin(), data.beta.end(), 1.0f);
  const std::vector<float> y = data.run();
  const std::vector<float> wrong = data.reference(/*pad_with_pre_of_zero=*/true);
  EXPECT_LE(rel_l2(y, data.reference()), kTolerance);
  EXPECT_GT(rel_l2(y, wrong), 1e-2);
}

TEST(CpuOps, Conv2dWorkspaceIsZeroOnlyWithoutGather) {
  test::Rng rng;
  EXPECT_EQ(conv2d_cpu_workspace_bytes(ConvData({2, 7, 5, 16, 8, 1, 1, 0}, rng).params()), 0u);
  EXPECT_GT(conv2d_cpu_workspace_bytes(ConvData({2, 7, 5, 16, 8, 1, 2, 0}, rng).params()), 0u);
  EXPECT_GT(conv2d_cpu_workspace_bytes(ConvData({2, 7, 5, 16, 8, 1, 1, 0, 8}, rng).params()), 0u);
  EXPECT_GT(conv2d_cpu_workspace_bytes(ConvData({2, 7, 5, 16, 8, 3, 1, 1}, rng).params()), 0u);
}

TEST(CpuOps, Conv2dRejectsASmallWorkspace) {
  test::Rng rng;
  const ConvData data({1, 6, 6, 4, 4, 3, 1, 1}, rng);
  Conv2dParams p = data.params();
  std::vector<float> y(36 * 4), ws(1);
  p.y = y.data();
  p.workspace = ws.data();
  p.workspace_bytes = conv2d_cpu_workspace_bytes(p) - sizeof(float);
  EXPECT_THROW(conv2d_cpu(p), Error);
}

// A residual that enters linearly may be the output buffer itself (the in-place skip connection).
TEST(CpuOps, Conv2dResidualMayAliasTheOutputWithoutActivation) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const ConvData data({2, 7, 5, 16, 12, 3, 1, 1, 0, false, true, true, true}, rng);
  const std::vector<float> expected = data.reference();
  Conv2dParams p = data.params();
  std::vector<float> y = data.residual;
  std::vector<float> ws = workspace_for(conv2d_cpu_workspace_bytes(p));
  p.y = y.data();
  p.residual = y.data();
  p.workspace = ws.data();
  p.workspace_bytes = conv2d_cpu_workspace_bytes(p);
  conv2d_cpu(p);
  EXPECT_LE(rel_l2(y, expected), kTolerance);

  p.act = Activation::Silu;  // now the residual is added after the activation: aliasing cannot work
  EXPECT_THROW(conv2d_cpu(p), Error);
}

// ---------------------------------------------------------------------------------------------------
// linear

TEST(CpuOps, LinearMatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int m, n, k;
    bool bias, residual;
    Activation act;
  };
  // {3, 200, 700}: fewer rows than columns, so the threads split the columns.
  for (const Case& c : std::vector<Case>{{1, 1, 1, false, false, Activation::None},
                                         {3, 200, 700, true, true, Activation::None},
                                         {2, 1280, 320, true, false, Activation::Silu},
                                         {77, 64, 1024, false, false, Activation::None},
                                         {37, 19, 23, true, true, Activation::None},
                                         {33, 40, 17, true, true, Activation::Silu}}) {
    SCOPED_TRACE(cat("linear ", c.m, "x", c.k, " -> ", c.n, " bias ", c.bias, " residual ", c.residual));
    const std::vector<float> x = rng.vector(size_t(c.m) * c.k), w = rng.vector(size_t(c.n) * c.k);
    const std::vector<float> bias = rng.vector(c.n), residual = rng.vector(size_t(c.m) * c.n);
    std::vector<double> expected(size_t(c.m) * c.n);
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        double acc = c.bias ? bias[j] : 0.0;
        for (int l = 0; l < c.k; ++l) acc += double(x[size_t(i) * c.k + l]) * w[size_t(j) * c.k + l];
        acc = act_ref(acc, c.act);
        expected[size_t(i) * c.n + j] = acc + (c.residual ? residual[size_t(i) * c.n + j] : 0.0);
      }
    std::vector<float> y = poisoned(expected.size());
    LinearParams p;
    p.x = x.data(), p.w = w.data(), p.y = y.data();
    p.bias = c.bias ? bias.data() : nullptr;
    p.residual = c.residual ? residual.data() : nullptr;
    p.m = c.m, p.n = c.n, p.k = c.k, p.act = c.act;
    linear_cpu(p);
    EXPECT_LE(rel_l2(y, to_float(expected)), kTolerance);

    if (c.residual && c.act == Activation::None) {  // in place: h += linear(x)
      y = residual;
      p.y = y.data(), p.residual = y.data();
      linear_cpu(p);
      EXPECT_LE(rel_l2(y, to_float(expected)), kTolerance) << "output aliasing the residual";
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// attention

struct AttentionCase {
  int batch, heads, head_dim, q_len, kv_len;
  bool fused_qkv = false;  // q, k, v read in place from one (tokens, 3 C) projection; self-attention only
  // > 0: q and k are integers in [-r, r] and the scale a power of two, so that scores of a few hundred
  // are exact in fp32: large enough to overflow exp without the max shift, still comparable at 1e-5.
  int integer_qk = 0;
};

std::vector<float> integers(test::Rng& rng, size_t n, int r) {
  std::vector<float> v(n);
  for (float& e : v) e = float(rng.integer(-r, r));
  return v;
}

TEST(CpuOps, AttentionMatchesExplicitSoftmax) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<AttentionCase> cases = {
      {2, 2, 64, 37, 37},            // self-attention
      {2, 3, 40, 50, 77},            // cross-attention, SD 1.5 head dims
      {1, 2, 80, 129, 77},
      {2, 1, 160, 9, 77},
      {1, 3, 5, 3, 1},               // one key: softmax of a single score is 1
      {2, 2, 64, 45, 45, true},      // fused QKV layout, strided
      {1, 1, 16, 500, 2500},         // more queries than one score block holds: two blocks
      {2, 2, 64, 20, 33, false, 12},  // scores beyond 88: exp overflows without the max shift
  };
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(cat("attention b", c.batch, " h", c.heads, " d", c.head_dim, " q", c.q_len, " kv", c.kv_len,
                     " fused ", c.fused_qkv, " integer_qk ", c.integer_qk));
    const int width = c.heads * c.head_dim;
    AttentionParams p;
    p.batch = c.batch, p.heads = c.heads, p.head_dim = c.head_dim, p.q_len = c.q_len, p.kv_len = c.kv_len;
    p.scale = 1.0f / std::sqrt(float(c.head_dim));
    std::vector<float> qkv, q, k, v;
    if (c.fused_qkv) {
      qkv = rng.vector(size_t(c.batch) * c.q_len * 3 * width);
      p.q = qkv.data(), p.k = qkv.data() + width, p.v = qkv.data() + 2 * width;
      p.q_stride = p.k_stride = p.v_stride = 3 * width;
    } else {
      const size_t q_count = size_t(c.batch) * c.q_len * width, kv_count = size_t(c.batch) * c.kv_len * width;
      q = c.integer_qk ? integers(rng, q_count, c.integer_qk) : rng.vector(q_count);
      k = c.integer_qk ? integers(rng, kv_count, c.integer_qk) : rng.vector(kv_count);
      v = rng.vector(kv_count);
      p.q = q.data(), p.k = k.data(), p.v = v.data();
      p.q_stride = p.k_stride = p.v_stride = width;
    }
    // o rows are wider than the heads: the extra columns belong to someone else and must stay as they are.
    const int o_stride = width + 3;
    constexpr float kUntouched = 7.0f;
    std::vector<float> o(size_t(c.batch) * c.q_len * o_stride, kUntouched);
    for (size_t t = 0; t < size_t(c.batch) * c.q_len; ++t)
      std::fill_n(o.begin() + t * o_stride, width, test::kPoison);
    p.o = o.data(), p.o_stride = o_stride;
    std::vector<float> ws = workspace_for(attention_cpu_workspace_bytes(p));
    p.workspace = ws.data(), p.workspace_bytes = attention_cpu_workspace_bytes(p);
    attention_cpu(p);

    const auto* qp = static_cast<const float*>(p.q);
    const auto* kp = static_cast<const float*>(p.k);
    const auto* vp = static_cast<const float*>(p.v);
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
            s[j] = dot * p.scale;
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
            got.push_back(o[token * o_stride + h * c.head_dim + d]);
          }
        }
        for (int gap = width; gap < o_stride; ++gap) gap_untouched &= o[token * o_stride + gap] == kUntouched;
      }
    EXPECT_LE(rel_l2(got, expected), kTolerance);
    EXPECT_TRUE(gap_untouched);
    if (c.integer_qk) {
      EXPECT_GT(max_score, 88.0) << "the case must reach scores where expf overflows";
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// normalisation

TEST(CpuOps, GroupNormMatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int n, hw, c, groups;
    Activation act;
    bool write_y;
    float offset;  // added to x: a mean far from 0 stresses the variance computation
    float stddev;  // of x: at 3e-3 the variance is of the order of eps, so eps must be in the right place
  };
  for (const Case& c : std::vector<Case>{{2, 35, 64, 32, Activation::Silu, true, 0.0f, 2.0f},
                                         {1, 49, 96, 32, Activation::None, true, 0.0f, 2.0f},
                                         {2, 64, 12, 4, Activation::Silu, true, 30.0f, 2.0f},
                                         {3, 17, 40, 1, Activation::None, true, 0.0f, 3e-3f},
                                         {2, 35, 64, 32, Activation::None, false, 0.0f, 2.0f}}) {
    SCOPED_TRACE(cat("group_norm n", c.n, " hw", c.hw, " c", c.c, " groups", c.groups, " y ", c.write_y));
    std::vector<float> x = rng.normal_vector(size_t(c.n) * c.hw * c.c, c.stddev);
    for (float& e : x) e += c.offset;
    const std::vector<float> gamma = rng.vector(c.c), beta = rng.vector(c.c);
    const int per_group = c.c / c.groups;
    std::vector<double> stats_ref, y_ref(x.size());
    for (int img = 0; img < c.n; ++img)
      for (int g = 0; g < c.groups; ++g) {
        double sum = 0, sq = 0;
        const double count = double(c.hw) * per_group;
        for (int px = 0; px < c.hw; ++px)
          for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch)
            sum += x[(size_t(img) * c.hw + px) * c.c + ch];
        const double mean = sum / count;
        for (int px = 0; px < c.hw; ++px)
          for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
            const double d = x[(size_t(img) * c.hw + px) * c.c + ch] - mean;
            sq += d * d;
          }
        const double rstd = 1.0 / std::sqrt(sq / count + 1e-5);
        stats_ref.push_back(mean);
        stats_ref.push_back(rstd);
        for (int px = 0; px < c.hw; ++px)
          for (int ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
            const size_t i = (size_t(img) * c.hw + px) * c.c + ch;
            y_ref[i] = act_ref((x[i] - mean) * rstd * gamma[ch] + beta[ch], c.act);
          }
      }
    std::vector<float> y = poisoned(x.size()), stats = poisoned(stats_ref.size());
    GroupNormParams p;
    p.x = x.data(), p.y = c.write_y ? y.data() : nullptr, p.stats = stats.data();
    p.gamma = gamma.data(), p.beta = beta.data();
    p.n = c.n, p.hw = c.hw, p.c = c.c, p.groups = c.groups, p.eps = 1e-5f, p.act = c.act;
    group_norm_cpu(p);
    EXPECT_LE(rel_l2(stats, to_float(stats_ref)), kTolerance);
    if (c.write_y) {
      EXPECT_LE(rel_l2(y, to_float(y_ref)), kTolerance);
    }
  }
}

TEST(CpuOps, LayerNormMatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (const auto& [rows, c] : std::vector<std::pair<int, int>>{{13, 320}, {1, 7}, {77, 1024}, {5, 1}}) {
    SCOPED_TRACE(cat("layer_norm rows ", rows, " c ", c));
    std::vector<float> x = rng.normal_vector(size_t(rows) * c, 3.0f);
    for (float& e : x) e += 5.0f;
    const std::vector<float> gamma = rng.vector(c), beta = rng.vector(c);
    std::vector<double> expected(x.size());
    for (int r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int i = 0; i < c; ++i) mean += x[size_t(r) * c + i] / double(c);
      for (int i = 0; i < c; ++i) var += std::pow(x[size_t(r) * c + i] - mean, 2) / c;
      for (int i = 0; i < c; ++i)
        expected[size_t(r) * c + i] =
            (x[size_t(r) * c + i] - mean) / std::sqrt(var + 1e-5) * gamma[i] + beta[i];
    }
    std::vector<float> y = poisoned(x.size());
    LayerNormParams p;
    p.x = x.data(), p.y = y.data(), p.gamma = gamma.data(), p.beta = beta.data();
    p.rows = rows, p.c = c, p.eps = 1e-5f;
    layer_norm_cpu(p);
    EXPECT_LE(rel_l2(y, to_float(expected)), kTolerance);
  }
}

// ---------------------------------------------------------------------------------------------------
// elementwise

TEST(CpuOps, GegluUsesExactGelu) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (const auto& [rows, f] : std::vector<std::pair<int, int>>{{7, 33}, {1, 1}, {64, 1280}}) {
    const std::vector<float> x = rng.vector(size_t(rows) * 2 * f, -4.0f, 4.0f);
    std::vector<double> expected;
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < f; ++i) {
        const double hidden = x[size_t(r) * 2 * f + i], gate = x[size_t(r) * 2 * f + f + i];
        expected.push_back(hidden * 0.5 * gate * (1.0 + std::erf(gate / std::sqrt(2.0))));
      }
    std::vector<float> y = poisoned(expected.size());
    GegluParams p;
    p.x = x.data(), p.y = y.data(), p.rows = rows, p.f = f;
    geglu_cpu(p);
    EXPECT_LE(rel_l2(y, to_float(expected)), kTolerance) << rows << " x " << f;
  }
}

TEST(CpuOps, SiluMatchesNaiveAlsoInPlace) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int64_t count : {1, 37, 100003}) {
    std::vector<float> x = rng.vector(count, -20.0f, 20.0f);
    std::vector<double> expected;
    for (float e : x) expected.push_back(silu_ref(e));
    std::vector<float> y = poisoned(count);
    SiluParams p;
    p.x = x.data(), p.y = y.data(), p.count = count;
    silu_cpu(p);
    EXPECT_LE(rel_l2(y, to_float(expected)), kTolerance) << count;
    p.y = x.data();
    silu_cpu(p);
    EXPECT_LE(rel_l2(x, to_float(expected)), kTolerance) << count << " in place";
  }
}

TEST(CpuOps, Upsample2xRepeatsEachPixel) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int n = 2, h = 3, w = 5, c = 7;
  const std::vector<float> x = rng.vector(size_t(n) * h * w * c);
  std::vector<float> y = poisoned(size_t(n) * 4 * h * w * c), expected;
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < 2 * h; ++oy)
      for (int ox = 0; ox < 2 * w; ++ox)
        for (int ch = 0; ch < c; ++ch)
          expected.push_back(x[((size_t(img) * h + oy / 2) * w + ox / 2) * c + ch]);
  Upsample2xParams p;
  p.x = x.data(), p.y = y.data(), p.n = n, p.h = h, p.w = w, p.c = c;
  upsample2x_cpu(p);
  EXPECT_EQ(y, expected);
}

TEST(CpuOps, ConcatPutsAThenBPerPixel) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int pixels = 35, ca = 5, cb = 11;
  const std::vector<float> a = rng.vector(pixels * ca), b = rng.vector(pixels * cb);
  std::vector<float> y = poisoned(pixels * (ca + cb)), expected;
  for (int px = 0; px < pixels; ++px) {
    for (int i = 0; i < ca; ++i) expected.push_back(a[px * ca + i]);
    for (int i = 0; i < cb; ++i) expected.push_back(b[px * cb + i]);
  }
  ConcatParams p;
  p.a = a.data(), p.b = b.data(), p.y = y.data(), p.pixels = pixels, p.ca = ca, p.cb = cb;
  concat_cpu(p);
  EXPECT_EQ(y, expected);
}

// ---------------------------------------------------------------------------------------------------
// conditioning

TEST(CpuOps, TimestepEmbeddingMatchesDiffusers) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int dim;
    bool flip;
    float shift, max_period;
  };
  for (const Case& c : std::vector<Case>{{32, true, 0.0f, 10000.0f},
                                         {33, false, 1.0f, 10000.0f},
                                         {320, true, 0.0f, 10000.0f},
                                         {8, false, 0.5f, 100.0f}}) {
    for (float t : {0.0f, rng.uniform(0.0f, 1.0f), rng.uniform(0.0f, 1000.0f), 999.0f}) {
      SCOPED_TRACE(cat("dim ", c.dim, " flip ", c.flip, " shift ", c.shift, " t ", t));
      const int n = 2, half = c.dim / 2;
      // diffusers computes exponent, frequency and argument in fp32 tensors; at t ~ 1000 the argument's
      // rounding is ~6e-5 rad, so the reference rounds them alike and takes sin/cos in float64.
      std::vector<double> row(c.dim, 0.0);
      for (int i = 0; i < half; ++i) {
        const float log_period = float(-std::log(double(c.max_period)));
        const float exponent = log_period * float(i) / float(half - double(c.shift));
        const float arg = t * float(std::exp(double(exponent)));
        row[c.flip ? half + i : i] = std::sin(double(arg));
        row[c.flip ? i : half + i] = std::cos(double(arg));
      }
      std::vector<double> expected;
      for (int img = 0; img < n; ++img) expected.insert(expected.end(), row.begin(), row.end());
      std::vector<float> y = poisoned(expected.size());
      TimestepEmbeddingParams p;
      p.y = y.data(), p.n = n, p.dim = c.dim, p.timestep = t;
      p.flip_sin_to_cos = c.flip, p.freq_shift = c.shift, p.max_period = c.max_period;
      timestep_embedding_cpu(p);
      EXPECT_LE(rel_l2(y, to_float(expected)), kTolerance);
    }
  }
}

TEST(CpuOps, EmbeddingLooksUpAndAccumulates) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int rows = 10, dim = 7, n = 5;
  const std::vector<float> table = rng.vector(rows * dim), start = rng.vector(n * dim);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = rng.integer(0, rows - 1);
  for (bool accumulate : {false, true}) {
    std::vector<float> y = accumulate ? start : poisoned(n * dim), expected;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < dim; ++j)
        expected.push_back(table[ids[i] * dim + j] + (accumulate ? start[i * dim + j] : 0.0f));
    EmbeddingParams p;
    p.table = table.data(), p.ids = ids.data(), p.y = y.data(), p.n = n, p.rows = rows, p.dim = dim;
    p.accumulate = accumulate;
    embedding_cpu(p);
    EXPECT_EQ(y, expected) << "accumulate " << accumulate;
  }
  std::vector<float> y(n * dim);
  ids[3] = rows;
  EmbeddingParams p;
  p.table = table.data(), p.ids = ids.data(), p.y = y.data(), p.n = n, p.rows = rows, p.dim = dim;
  EXPECT_THROW(embedding_cpu(p), Error);
}

TEST(CpuOps, FilmCombinesProjectionWithFoldedNorm) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int n = 2, c = 6, stride = 40, offset = 9;
  const std::vector<float> proj = rng.vector(n * stride);
  const std::vector<float> base_scale = rng.vector(c), base_bias = rng.vector(c);
  for (bool with_scale : {true, false})
    for (bool with_base : {true, false}) {
      SCOPED_TRACE(cat("with_scale ", with_scale, " with_base ", with_base));
      std::vector<double> scale_ref, bias_ref;
      for (int img = 0; img < n; ++img)
        for (int j = 0; j < c; ++j) {
          const double s = with_base ? base_scale[j] : 1.0, t = with_base ? base_bias[j] : 0.0;
          const double first = proj[img * stride + offset + j];
          if (with_scale) {
            const double b = proj[img * stride + offset + c + j];
            scale_ref.push_back(s * (1.0 + first));
            bias_ref.push_back(t * (1.0 + first) + b);
          } else {
            bias_ref.push_back(t + first);
          }
        }
      std::vector<float> scale = poisoned(n * c), bias = poisoned(n * c);
      FilmParams p;
      p.proj = proj.data(), p.proj_stride = stride, p.proj_offset = offset;
      p.base_scale = with_base && with_scale ? base_scale.data() : nullptr;
      p.base_bias = with_base ? base_bias.data() : nullptr;
      p.scale = scale.data(), p.bias = bias.data(), p.n = n, p.c = c, p.with_scale = with_scale;
      film_cpu(p);
      EXPECT_LE(rel_l2(bias, to_float(bias_ref)), kTolerance);
      if (with_scale) {
        EXPECT_LE(rel_l2(scale, to_float(scale_ref)), kTolerance);
      }
    }
}

// ---------------------------------------------------------------------------------------------------
// sampler

TEST(CpuOps, GuidanceStepAppliesCfgAndEuler) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int64_t count = 1001;
  for (int batch : {2, 1})
    for (bool with_model_in : {true, false}) {
      SCOPED_TRACE(cat("batch ", batch, " model_in ", with_model_in));
      const std::vector<float> v = rng.vector(batch * count), x0 = rng.vector(count);
      const float guidance = rng.uniform(1.0f, 8.0f), dt = rng.uniform(0.05f, 0.5f);
      std::vector<double> expected;
      for (int64_t i = 0; i < count; ++i) {
        const double cond = v[i], uncond = batch == 2 ? v[count + i] : 0.0;
        const double vel = batch == 2 ? uncond + guidance * (cond - uncond) : cond;
        expected.push_back(x0[i] - double(dt) * vel);
      }
      std::vector<float> x = x0, model_in = poisoned(batch * count);
      GuidanceStepParams p;
      p.v = v.data(), p.x = x.data(), p.model_in = with_model_in ? model_in.data() : nullptr;
      p.count = count, p.batch = batch, p.guidance = guidance, p.dt = dt;
      guidance_step_cpu(p);
      EXPECT_LE(rel_l2(x, to_float(expected)), kTolerance);
      for (int b = 0; with_model_in && b < batch; ++b) {
        EXPECT_EQ(std::vector<float>(model_in.begin() + b * count, model_in.begin() + (b + 1) * count), x);
      }
    }
}

TEST(CpuOps, TemporalBlendTakesTheFirstFrameAsIs) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int64_t count = 777;
  const std::vector<float> frame1 = rng.vector(count), frame2 = rng.vector(count);
  std::vector<float> prev = poisoned(count), out = poisoned(count);  // nothing before the first frame
  TemporalBlendParams p;
  p.x = frame1.data(), p.prev = prev.data(), p.out = out.data(), p.count = count, p.blend = 0.7f;
  p.first = true;
  temporal_blend_cpu(p);
  EXPECT_EQ(out, frame1);
  EXPECT_EQ(prev, frame1);

  p.x = frame2.data();
  p.first = false;
  temporal_blend_cpu(p);
  std::vector<double> expected;
  for (int64_t i = 0; i < count; ++i) expected.push_back(0.7 * frame1[i] + 0.3 * frame2[i]);
  EXPECT_LE(rel_l2(out, to_float(expected)), kTolerance);
  EXPECT_EQ(prev, out);
}

TEST(CpuOps, ToRgba8RoundsAndClamps) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int h = 3, w = 7;
  for (int c : {3, 1}) {
    std::vector<float> x = rng.vector(size_t(h) * w * c, -1.3f, 1.3f);
    const std::vector<float> fixed = {-1.0f, 1.0f, 0.0f, -5.0f, 5.0f};  // 0, 255, 127.5 -> 128, clamps
    std::copy(fixed.begin(), fixed.end(), x.begin());
    std::vector<uint8_t> rgba(size_t(h) * w * 4, 17);
    ToRgba8Params p;
    p.x = x.data(), p.rgba = rgba.data(), p.h = h, p.w = w, p.c = c;
    to_rgba8_cpu(p);
    for (int px = 0; px < h * w; ++px)
      for (int ch = 0; ch < 4; ++ch) {
        const double in = x[px * c + (c == 3 ? std::min(ch, 2) : 0)];
        const double exact = std::clamp((in + 1.0) * 127.5, 0.0, 255.0);
        const int expected = ch == 3 ? 255 : int(std::nearbyint(exact));
        // fp32 may round a value within ~1e-4 of a tie to the other side: allow one step only there.
        const bool near_tie = std::fabs(exact - std::floor(exact) - 0.5) < 1e-3;
        EXPECT_LE(std::abs(int(rgba[px * 4 + ch]) - expected), ch < 3 && near_tie ? 1 : 0)
            << "c " << c << " pixel " << px << " channel " << ch << " x " << x[px * c];
      }
    EXPECT_EQ(rgba[0], 0);
    EXPECT_EQ(c == 3 ? rgba[1] : rgba[5], 255);  // pixel 1 of a grey image is x = 1 in all of R, G, B
  }
}

}  // namespace
}  // namespace rtvd
