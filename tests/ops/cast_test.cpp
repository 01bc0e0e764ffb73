// cast on its case table (kernels/cast/cast_cases.h): the fp32 sample into each image of the model input.
// Fresh random inputs every run (the seed is in the failure message); outputs poisoned with NaN.
//   CastCpu: cast_cpu (activations are fp32 on the CPU) must copy x exactly into every copy.
//   CastCuda (CUDA builds, skipping without a device): cast must write fp16(x) into every copy, exactly
//     cast_cpu's output rounded to fp16, also at a 2-byte aligned y.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/cast/cast.h"
#include "kernels/cast/cast_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/cast/cast.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const CastCase& c, std::ostream* os) { *os << c.name; }

namespace {

class CastCpu : public testing::TestWithParam<CastCase> {};

TEST_P(CastCpu, CopiesIntoEveryImage) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const CastCase& c = GetParam();
  const std::vector<float> x = rng.normal_vector(size_t(c.count));
  std::vector<float> y = test::poisoned(size_t(c.count) * c.copies), expected;
  for (int b = 0; b < c.copies; ++b) expected.insert(expected.end(), x.begin(), x.end());
  cast_cpu(cast_params(c, x.data(), y.data()));
  EXPECT_EQ(y, expected);
}

INSTANTIATE_TEST_SUITE_P(Cases, CastCpu, testing::ValuesIn(cast_cases()), test::case_name);

#if RTVD_HAS_CUDA

class CastCuda : public test::OnCuda<CastCase> {};

TEST_P(CastCuda, MatchesCpuRoundedToHalf) {
  SCOPED_TRACE(test::seed_trace(rng));
  const CastCase& c = GetParam();
  const size_t size = size_t(c.count) * c.copies;
  const std::vector<float> x = rng.normal_vector(size_t(c.count), 3.0f);
  const DeviceMemory x_d = test::to_device_float(x);
  const test::HalfTensor y = test::poisoned_half_tensor(size, c.y_misalign_bytes);
  cast(cast_params(c, x_d.as<float>(), y.get()), host_->ctx());
  RTVD_CUDA_CHECK(cudaStreamSynchronize(host_->stream()));
  std::vector<float> y_ref(size);
  cast_cpu(cast_params(c, x.data(), y_ref.data()));
  EXPECT_EQ(y.read(size), test::round_to_half(y_ref));
}

INSTANTIATE_TEST_SUITE_P(Production, CastCuda, testing::ValuesIn(test::production_cases(cast_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, CastCuda, testing::ValuesIn(test::edge_cases(cast_cases())), test::case_name);

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
