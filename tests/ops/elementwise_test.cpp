// The elementwise ops on their case tables (kernels/elementwise/elementwise_cases.h): GEGLU, SiLU, nearest
// 2x upsampling, channel concat, scale-activation-scale. Fresh random inputs every run (the seed is in the
// failure message); outputs poisoned with NaN.
//   <Op>Cpu: the CPU reference against a naive definition (float64): rel L2 <= 1e-5; upsampling and concat
//     only move values and must be exact. SiLU and scale_activation run out of place and in place (the latter
//     with a residual where its case has one).
//   <Op>Cuda (CUDA builds, skipping without a device): the kernel against the CPU reference on the same fp16
//     values, also at 2-byte aligned pointers (the scalar kernels): rel L2 <= 2e-3 (fp16 output); upsampling
//     and concat exact.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/elementwise_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/elementwise/elementwise.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const GegluCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const SiluCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const Upsample2xCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const ConcatCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const ScaleActivationCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::activation_ref;
using test::rel_l2;
using test::silu_ref;

constexpr double kTolerance = 1e-5;

// ---------------------------------------------------------------------------------------------------
// CPU references

class GegluCpu : public testing::TestWithParam<GegluCase> {};
class SiluCpu : public testing::TestWithParam<SiluCase> {};
class Upsample2xCpu : public testing::TestWithParam<Upsample2xCase> {};
class ConcatCpu : public testing::TestWithParam<ConcatCase> {};
class ScaleActivationCpu : public testing::TestWithParam<ScaleActivationCase> {};

TEST_P(GegluCpu, UsesExactGelu) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const GegluCase& c = GetParam();
  const std::vector<float> x = rng.vector(size_t(c.rows) * 2 * c.f, -4.0f, 4.0f);
  std::vector<float> expected;
  for (int r = 0; r < c.rows; ++r)
    for (int i = 0; i < c.f; ++i) {
      const double hidden = x[size_t(r) * 2 * c.f + i], gate = x[size_t(r) * 2 * c.f + c.f + i];
      expected.push_back(float(hidden * 0.5 * gate * (1.0 + std::erf(gate / std::sqrt(2.0)))));
    }
  std::vector<float> y = test::poisoned(expected.size());
  geglu_cpu(geglu_params(c, x.data(), y.data()));
  EXPECT_LE(rel_l2(y, expected), kTolerance) << c.rows << " x " << c.f;
}

TEST_P(SiluCpu, MatchesNaiveAlsoInPlace) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const SiluCase& c = GetParam();
  std::vector<float> x = rng.vector(size_t(c.count), -20.0f, 20.0f);
  std::vector<float> expected;
  for (float e : x) expected.push_back(float(silu_ref(e)));
  std::vector<float> y = test::poisoned(size_t(c.count));
  SiluCase out_of_place = c;
  out_of_place.in_place = false;
  silu_cpu(silu_params(out_of_place, x.data(), y.data()));
  EXPECT_LE(rel_l2(y, expected), kTolerance) << c.count;
  SiluCase in_place = c;
  in_place.in_place = true;
  silu_cpu(silu_params(in_place, x.data(), nullptr));
  EXPECT_LE(rel_l2(x, expected), kTolerance) << c.count << " in place";
}

TEST_P(Upsample2xCpu, RepeatsEachPixel) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Upsample2xCase& c = GetParam();
  const std::vector<float> x = rng.vector(size_t(c.n) * c.h * c.w * c.c);
  std::vector<float> y = test::poisoned(4 * x.size()), expected;
  for (int img = 0; img < c.n; ++img)
    for (int oy = 0; oy < 2 * c.h; ++oy)
      for (int ox = 0; ox < 2 * c.w; ++ox)
        for (int ch = 0; ch < c.c; ++ch) expected.push_back(x[((size_t(img) * c.h + oy / 2) * c.w + ox / 2) * c.c + ch]);
  upsample2x_cpu(upsample2x_params(c, x.data(), y.data()));
  EXPECT_EQ(y, expected);
}

TEST_P(ConcatCpu, PutsAThenBPerPixel) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const ConcatCase& c = GetParam();
  const std::vector<float> a = rng.vector(size_t(c.pixels) * c.ca), b = rng.vector(size_t(c.pixels) * c.cb);
  std::vector<float> y = test::poisoned(size_t(c.pixels) * (c.ca + c.cb)), expected;
  for (int64_t px = 0; px < c.pixels; ++px) {
    for (int i = 0; i < c.ca; ++i) expected.push_back(a[px * c.ca + i]);
    for (int i = 0; i < c.cb; ++i) expected.push_back(b[px * c.cb + i]);
  }
  concat_cpu(concat_params(c, a.data(), b.data(), y.data()));
  EXPECT_EQ(y, expected);
}

TEST_P(ScaleActivationCpu, MatchesDefinitionAlsoInPlace) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const ScaleActivationCase& c = GetParam();
  std::vector<float> x = rng.vector(size_t(c.count), -6.0f, 6.0f), r = rng.vector(size_t(c.count), -6.0f, 6.0f);
  std::vector<float> expected;
  for (size_t i = 0; i < x.size(); ++i)
    expected.push_back(float(c.out_scale * activation_ref(double(c.in_scale) * x[i] + c.in_shift, c.act) +
                             (c.with_residual ? r[i] : 0.0)));
  std::vector<float> y = test::poisoned(size_t(c.count));
  ScaleActivationCase out_of_place = c;
  out_of_place.in_place = false;
  scale_activation_cpu(scale_activation_params(out_of_place, x.data(), y.data(), r.data()));
  EXPECT_LE(rel_l2(y, expected), kTolerance) << c.count;
  ScaleActivationCase in_place = c;
  in_place.in_place = true;
  scale_activation_cpu(scale_activation_params(in_place, x.data(), nullptr, r.data()));
  EXPECT_LE(rel_l2(x, expected), kTolerance) << c.count << " in place";
}

INSTANTIATE_TEST_SUITE_P(Cases, GegluCpu, testing::ValuesIn(geglu_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, SiluCpu, testing::ValuesIn(silu_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, Upsample2xCpu, testing::ValuesIn(upsample2x_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, ConcatCpu, testing::ValuesIn(concat_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, ScaleActivationCpu, testing::ValuesIn(scale_activation_cases()), test::case_name);

#if RTVD_HAS_CUDA
// ---------------------------------------------------------------------------------------------------
// GPU against the CPU references

class GegluCuda : public test::OnCuda<GegluCase> {};
class SiluCuda : public test::OnCuda<SiluCase> {};
class Upsample2xCuda : public test::OnCuda<Upsample2xCase> {};
class ConcatCuda : public test::OnCuda<ConcatCase> {};
class ScaleActivationCuda : public test::OnCuda<ScaleActivationCase> {};

TEST_P(GegluCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GegluCase& c = GetParam();
  const size_t out_size = size_t(c.rows) * c.f;
  const test::HalfTensor x = test::half_tensor(rng.normal_vector(2 * out_size, 2.0f), c.misalign_bytes);
  const test::HalfTensor y = test::poisoned_half_tensor(out_size, c.misalign_bytes);
  geglu(geglu_params(c, x.get(), y.get()), ctx());
  sync();
  std::vector<float> y_ref(out_size);
  geglu_cpu(geglu_params(c, x.host.data(), y_ref.data()));
  EXPECT_LE(rel_l2(y.read(out_size), y_ref), 2e-3);
}

TEST_P(SiluCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const SiluCase& c = GetParam();
  const size_t count = size_t(c.count);
  const test::HalfTensor x = test::half_tensor(rng.normal_vector(count, 3.0f), c.misalign_bytes);
  const test::HalfTensor y = test::poisoned_half_tensor(count, c.misalign_bytes);
  silu(silu_params(c, x.get(), y.get()), ctx());
  sync();
  std::vector<float> x_ref = x.host, y_ref(count);
  silu_cpu(silu_params(c, x_ref.data(), y_ref.data()));
  EXPECT_LE(rel_l2((c.in_place ? x : y).read(count), c.in_place ? x_ref : y_ref), 2e-3);
}

// Upsampling and concat only move fp16 values: the result must be exact.
TEST_P(Upsample2xCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const Upsample2xCase& c = GetParam();
  const size_t in_size = size_t(c.n) * c.h * c.w * c.c, out_size = 4 * in_size;
  const test::HalfTensor x = test::half_tensor(rng.vector(in_size), c.misalign_bytes);
  const test::HalfTensor y = test::poisoned_half_tensor(out_size, c.misalign_bytes);
  upsample2x(upsample2x_params(c, x.get(), y.get()), ctx());
  sync();
  std::vector<float> y_ref(out_size);
  upsample2x_cpu(upsample2x_params(c, x.host.data(), y_ref.data()));
  EXPECT_EQ(rel_l2(y.read(out_size), y_ref), 0.0);
}

TEST_P(ConcatCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const ConcatCase& c = GetParam();
  const size_t out_size = size_t(c.pixels) * (c.ca + c.cb);
  const test::HalfTensor a = test::half_tensor(rng.vector(size_t(c.pixels) * c.ca), c.misalign_bytes);
  const test::HalfTensor b = test::half_tensor(rng.vector(size_t(c.pixels) * c.cb));
  const test::HalfTensor y = test::poisoned_half_tensor(out_size);
  concat(concat_params(c, a.get(), b.get(), y.get()), ctx());
  sync();
  std::vector<float> y_ref(out_size);
  concat_cpu(concat_params(c, a.host.data(), b.host.data(), y_ref.data()));
  EXPECT_EQ(rel_l2(y.read(out_size), y_ref), 0.0);
}

TEST_P(ScaleActivationCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const ScaleActivationCase& c = GetParam();
  const size_t count = size_t(c.count);
  const test::HalfTensor x = test::half_tensor(rng.normal_vector(count, 3.0f), c.misalign_bytes);
  const test::HalfTensor y = test::poisoned_half_tensor(count, c.misalign_bytes);
  const test::HalfTensor r = test::half_tensor(rng.normal_vector(count, 3.0f), c.misalign_bytes);
  scale_activation(scale_activation_params(c, x.get(), y.get(), r.get()), ctx());
  sync();
  std::vector<float> x_ref = x.host, y_ref(count);
  scale_activation_cpu(scale_activation_params(c, x_ref.data(), y_ref.data(), r.host.data()));
  EXPECT_LE(rel_l2((c.in_place ? x : y).read(count), c.in_place ? x_ref : y_ref), 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Production, GegluCuda, testing::ValuesIn(test::production_cases(geglu_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, GegluCuda, testing::ValuesIn(test::edge_cases(geglu_cases())), test::case_name);
INSTANTIATE_TEST_SUITE_P(Production, SiluCuda, testing::ValuesIn(test::production_cases(silu_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, SiluCuda, testing::ValuesIn(test::edge_cases(silu_cases())), test::case_name);
INSTANTIATE_TEST_SUITE_P(Production, Upsample2xCuda, testing::ValuesIn(test::production_cases(upsample2x_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, Upsample2xCuda, testing::ValuesIn(test::edge_cases(upsample2x_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Production, ConcatCuda, testing::ValuesIn(test::production_cases(concat_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, ConcatCuda, testing::ValuesIn(test::edge_cases(concat_cases())), test::case_name);
INSTANTIATE_TEST_SUITE_P(Production, ScaleActivationCuda,
                         testing::ValuesIn(test::production_cases(scale_activation_cases())), test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, ScaleActivationCuda, testing::ValuesIn(test::edge_cases(scale_activation_cases())),
                         test::case_name);

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
