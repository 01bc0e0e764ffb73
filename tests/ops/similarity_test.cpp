// similarity on its case table (kernels/similarity/similarity_cases.h): each chunk's sums of x^2, y^2 and
// (x - y)^2. Fresh random inputs every run (the seed is in the failure message), y near x as the filter sees
// it (a source and the one before it) or unrelated; outputs poisoned with NaN.
//   SimilarityCpu: similarity_cpu against the definition in float64, each value's chunk found by division.
//   SimilarityCuda (CUDA builds, skipping without a device): similarity against similarity_cpu on the same
//     fp16-rounded y, and the same bits on a second run (the filter's decision must be deterministic).
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/similarity/similarity.h"
#include "kernels/similarity/similarity_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/similarity/similarity.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const SimilarityCase& c, std::ostream* os) { *os << c.name; }

namespace {

// x in [-1, 1] (a source image), and y: x plus noise of the given size (0: unrelated, uniform too).
struct Inputs {
  std::vector<float> x, y;
};
Inputs random_inputs(test::Rng& rng, int64_t count, float noise) {
  Inputs in{rng.vector(size_t(count)), {}};
  in.y = noise > 0 ? in.x : rng.vector(size_t(count));
  if (noise > 0)
    for (float& v : in.y) v += noise * rng.normal();
  return in;
}

// The sums in float64 from the definition: value i belongs to chunk floor(i / ceil(count / chunks)).
std::vector<double> naive_sums(const std::vector<float>& x, const std::vector<float>& y, int chunks) {
  const int64_t count = int64_t(x.size()), size = (count + chunks - 1) / chunks;
  std::vector<double> sums(size_t(chunks) * 3, 0.0);
  for (int64_t i = 0; i < count; ++i) {
    double* s = &sums[size_t(i / size) * 3];
    s[0] += double(x[i]) * x[i];
    s[1] += double(y[i]) * y[i];
    s[2] += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  }
  return sums;
}

// Each sum within rel of the expected one (plus a floor for the empty chunks' zeros).
void expect_near_sums(const std::vector<float>& got, const std::vector<double>& expected, double rel) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], rel * std::abs(expected[i]) + 1e-30) << "chunk " << i / 3 << " sum " << i % 3;
}

class SimilarityCpu : public testing::TestWithParam<SimilarityCase> {};

TEST_P(SimilarityCpu, MatchesTheDefinitionInFloat64) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const SimilarityCase& c = GetParam();
  for (float noise : {0.0f, 0.01f}) {
    const Inputs in = random_inputs(rng, c.count, noise);
    std::vector<float> sums = test::poisoned(size_t(c.chunks) * 3);
    similarity_cpu(similarity_params(c, in.x.data(), in.y.data(), sums.data()));
    expect_near_sums(sums, naive_sums(in.x, in.y, c.chunks), 1e-6);  // a double rounded to float
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SimilarityCpu, testing::ValuesIn(similarity_cases()), test::case_name);

#if RTVD_HAS_CUDA

class SimilarityCuda : public test::OnCuda<SimilarityCase> {};

TEST_P(SimilarityCuda, MatchesCpuAndRepeatsItsBits) {
  SCOPED_TRACE(test::seed_trace(rng));
  const SimilarityCase& c = GetParam();
  const size_t n_sums = size_t(c.chunks) * 3;
  for (float noise : {0.0f, 0.01f}) {
    const Inputs in = random_inputs(rng, c.count, noise);
    const DeviceMemory x_d = test::to_device_float(in.x);
    const test::HalfTensor y = test::half_tensor(in.y, c.y_misalign_bytes);  // y.host: the fp16 values
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 2; ++run) {
      const DeviceMemory sums_d = test::poisoned_float(n_sums);
      similarity(similarity_params(c, x_d.as<float>(), y.get(), sums_d.as<float>()), ctx());
      sync();
      runs.push_back(test::from_device_float(sums_d, n_sums));
    }
    std::vector<float> expected(n_sums);
    similarity_cpu(similarity_params(c, in.x.data(), y.host.data(), expected.data()));
    // fp32 sums of up to 6,144 values per thread block against float64's
    expect_near_sums(runs[0], std::vector<double>(expected.begin(), expected.end()), 3e-5);
    EXPECT_EQ(runs[0], runs[1]) << "a second run on the same inputs gave other bits";
  }
}

INSTANTIATE_TEST_SUITE_P(Production, SimilarityCuda, testing::ValuesIn(test::production_cases(similarity_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, SimilarityCuda, testing::ValuesIn(test::edge_cases(similarity_cases())),
                         test::case_name);

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
