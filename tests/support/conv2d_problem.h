// conv2d's test problems, shared by tests/ops/conv2d_test.cpp (each implementation against its reference) and
// conv2d_requirements_test.cpp (what each refuses): a case's inputs drawn afresh (x, w and the residual rounded
// to fp16 for the GPU), conv2d_cpu on them into poisoned outputs and workspace, a direct convolution in float64
// written from the math alone, and on the GPU the same inputs on the device with the CPU's output to compare.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/conv2d/conv2d_candidates.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd::test::conv {

constexpr double kTolerance = 1e-5;
constexpr double kNaiveBudget = 1e8;  // multiply-adds the naive loops may take per case (~0.3 s)

inline std::string describe(const Conv2dCase& c) {
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
inline bool residual_enters_gemm(const Conv2dCase& c) {
  return c.residual && c.scale == ConvRows::None && (c.act == Activation::None || c.act_after_residual);
}

// Workspace of the requested size, poisoned too: an op must not read scratch it did not write.
inline std::vector<float> workspace_for(size_t bytes) {
  return test::poisoned((bytes + sizeof(float) - 1) / sizeof(float));
}

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

inline const Conv2dCase& case_named(const std::string& name) {
  for (const Conv2dCase& c : conv2d_cases())
    if (c.name == name) return c;
  fail("no conv2d case named ", name);
}

#if RTVD_HAS_CUDA

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

inline void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  const double err = rel_l2(got, ref);
  EXPECT_LE(err, kHalfTolerance) << what << ": rel L2 " << err << ", max abs diff " << test::max_abs_diff(got, ref);
}

inline bool named(const Conv2dCandidate& c, const char* part) {
  return c.provider == Provider::Rtvd && c.name.find(part) != std::string::npos;
}
inline bool is_stem(const Conv2dCandidate& c) { return named(c, "stem"); }
inline bool is_narrow(const Conv2dCandidate& c) { return named(c, "narrow"); }
inline bool is_wgmma(const Conv2dCandidate& c) { return named(c, "wgmma"); }
inline bool is_igemm(const Conv2dCandidate& c) { return named(c, "igemm"); }
inline bool is_direct(const Conv2dCandidate& c) { return named(c, "direct"); }
inline bool is_cudnn(const Conv2dCandidate& c) { return c.provider == Provider::Cudnn; }

#endif  // RTVD_HAS_CUDA

}  // namespace rtvd::test::conv
