// layer_norm on its case table (kernels/layer_norm/layer_norm_cases.h). Fresh random inputs every run (the
// seed is in the failure message); outputs poisoned with NaN.
//   LayerNormCpu: layer_norm_cpu against a naive definition (float64); rel L2 <= 1e-5.
//   LayerNormCuda (CUDA builds, skipping without a device): layer_norm (the register path, or the scalar
//     kernel for wide, ragged or misaligned rows) against layer_norm_cpu on the same fp16 values; rel L2 <=
//     2e-3 (fp16 output).
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/layer_norm/layer_norm_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/layer_norm/layer_norm.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const LayerNormCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::NormData;
using test::rel_l2;

std::string describe(const LayerNormCase& c) {
  return cat(c.name, ": rows ", c.rows, " c ", c.c, " offset ", c.offset, " stddev ", c.stddev,
             c.misalign_bytes ? cat(" misaligned by ", c.misalign_bytes) : "");
}

class LayerNormCpu : public testing::TestWithParam<LayerNormCase> {};

TEST_P(LayerNormCpu, MatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const LayerNormCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  const NormData d(c, rng);
  std::vector<float> expected(d.x.size());
  for (int r = 0; r < c.rows; ++r) {
    const float* row = &d.x[size_t(r) * c.c];
    double mean = 0, var = 0;
    for (int i = 0; i < c.c; ++i) mean += row[i] / double(c.c);
    for (int i = 0; i < c.c; ++i) var += std::pow(row[i] - mean, 2) / c.c;
    for (int i = 0; i < c.c; ++i)
      expected[size_t(r) * c.c + i] = float((row[i] - mean) / std::sqrt(var + 1e-5) * d.gamma[i] + d.beta[i]);
  }
  std::vector<float> y = test::poisoned(d.x.size());
  layer_norm_cpu(layer_norm_params(c, d.x.data(), y.data(), d.gamma.data(), d.beta.data()));
  EXPECT_LE(rel_l2(y, expected), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, LayerNormCpu, testing::ValuesIn(layer_norm_cases()), test::case_name);

#if RTVD_HAS_CUDA

class LayerNormCuda : public test::OnCuda<LayerNormCase> {};

TEST_P(LayerNormCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const LayerNormCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  NormData d(c, rng);
  const test::HalfTensor x = test::half_tensor(d.x, c.misalign_bytes);
  const test::HalfTensor y = test::poisoned_half_tensor(c.elements(), c.misalign_bytes);
  const DeviceMemory gamma = test::to_device_float(d.gamma), beta = test::to_device_float(d.beta);
  const CudaContext& ctx = host_->ctx();
  layer_norm(layer_norm_params(c, x.get(), y.get(), gamma.as<float>(), beta.as<float>()), ctx);
  RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  std::vector<float> y_ref(c.elements());
  layer_norm_cpu(layer_norm_params(c, x.host.data(), y_ref.data(), d.gamma.data(), d.beta.data()));
  EXPECT_LE(rel_l2(y.read(c.elements()), y_ref), 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Production, LayerNormCuda, testing::ValuesIn(test::production_cases(layer_norm_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, LayerNormCuda, testing::ValuesIn(test::edge_cases(layer_norm_cases())), test::case_name);

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
