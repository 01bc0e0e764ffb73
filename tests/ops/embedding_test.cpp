// The conditioning ops on their case tables (kernels/embedding/embedding_cases.h): the sinusoidal timestep
// embedding, the embedding lookup and the FiLM combine. Fresh random inputs every run (the seed is in the
// failure message); outputs poisoned with NaN (an accumulating lookup adds to random values instead).
//   <Op>Cpu: the CPU reference against a naive definition: rel L2 <= 1e-5; the lookup is exact, and an id
//     out of range throws.
//   <Op>Cuda (CUDA builds, skipping without a device): the kernel against the CPU reference on the same
//     values: fp16 outputs rel L2 <= 2e-3; FiLM's fp32 outputs <= 1e-6 (identical fp16 inputs, at most a
//     contracted multiply-add apart). On the device an id out of range writes its row as NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/embedding/embedding.h"
#include "kernels/embedding/embedding_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/embedding/embedding.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const TimestepEmbeddingCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const EmbeddingCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const FilmCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::rel_l2;

constexpr double kTolerance = 1e-5;

// The timesteps every case is tried at: both ends of the schedule and two drawn afresh.
std::vector<float> timesteps(test::Rng& rng) {
  return {0.0f, rng.uniform(0.0f, 1.0f), rng.uniform(0.0f, 1000.0f), 999.0f};
}

// ---------------------------------------------------------------------------------------------------
// CPU references

class TimestepEmbeddingCpu : public testing::TestWithParam<TimestepEmbeddingCase> {};
class EmbeddingCpu : public testing::TestWithParam<EmbeddingCase> {};
class FilmCpu : public testing::TestWithParam<FilmCase> {};

// diffusers' embedding of t, one row: diffusers computes exponent, frequency and argument in fp32 tensors; at
// t ~ 1000 the argument's rounding is ~6e-5 rad, so this rounds them alike and takes sin/cos in float64.
std::vector<float> diffusers_row(const TimestepEmbeddingCase& c, float t) {
  const int half = c.dim / 2;
  std::vector<float> row(c.dim, 0.0f);
  for (int i = 0; i < half; ++i) {
    const float log_period = float(-std::log(double(c.max_period)));
    const float exponent = log_period * float(i) / float(half - double(c.freq_shift));
    const float arg = t * float(std::exp(double(exponent)));
    row[c.flip_sin_to_cos ? half + i : i] = float(std::sin(double(arg)));
    row[c.flip_sin_to_cos ? i : half + i] = float(std::cos(double(arg)));
  }
  return row;
}

// Every row at its own timestep (SDXL's time ids), drawn afresh, 0 and 999 among them.
std::vector<float> row_timesteps(const TimestepEmbeddingCase& c, test::Rng& rng) {
  std::vector<float> t = rng.vector(c.n, 0.0f, 1000.0f);
  t.front() = 0.0f;
  t.back() = 999.0f;
  return t;
}

TEST_P(TimestepEmbeddingCpu, MatchesDiffusers) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const TimestepEmbeddingCase& c = GetParam();
  for (float t : timesteps(rng)) {
    SCOPED_TRACE(cat("dim ", c.dim, " flip ", c.flip_sin_to_cos, " shift ", c.freq_shift, " t ", t));
    const std::vector<float> row = diffusers_row(c, t);
    std::vector<float> expected;
    for (int img = 0; img < c.n; ++img) expected.insert(expected.end(), row.begin(), row.end());
    std::vector<float> y = test::poisoned(expected.size());
    timestep_embedding_cpu(timestep_embedding_params(c, t, y.data()));
    EXPECT_LE(rel_l2(y, expected), kTolerance);
  }
}

TEST_P(TimestepEmbeddingCpu, RowsAtTheirOwnTimesteps) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const TimestepEmbeddingCase& c = GetParam();
  const std::vector<float> t = row_timesteps(c, rng);
  std::vector<float> expected;
  for (float ti : t) {
    const std::vector<float> row = diffusers_row(c, ti);
    expected.insert(expected.end(), row.begin(), row.end());
  }
  std::vector<float> y = test::poisoned(expected.size());
  TimestepEmbeddingParams p = timestep_embedding_params(c, 500.0f, y.data());
  p.timesteps = t.data();
  timestep_embedding_cpu(p);
  EXPECT_LE(rel_l2(y, expected), kTolerance);
}

TEST_P(EmbeddingCpu, LooksUpAndAccumulates) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const EmbeddingCase& c = GetParam();
  const std::vector<float> table = rng.vector(size_t(c.rows) * c.dim), start = rng.vector(size_t(c.n) * c.dim);
  std::vector<int32_t> ids(c.n);
  for (auto& id : ids) id = rng.integer(0, c.rows - 1);
  std::vector<float> y = c.accumulate ? start : test::poisoned(size_t(c.n) * c.dim), expected;
  for (int i = 0; i < c.n; ++i)
    for (int j = 0; j < c.dim; ++j)
      expected.push_back(table[size_t(ids[i]) * c.dim + j] + (c.accumulate ? start[size_t(i) * c.dim + j] : 0.0f));
  embedding_cpu(embedding_params(c, table.data(), ids.data(), y.data()));
  EXPECT_EQ(y, expected) << "accumulate " << c.accumulate;

  ids[c.n / 2] = c.rows;  // one past the table
  EXPECT_THROW(embedding_cpu(embedding_params(c, table.data(), ids.data(), y.data())), Error);
}

TEST_P(FilmCpu, CombinesProjectionWithFoldedNorm) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const FilmCase& c = GetParam();
  const std::vector<float> proj = rng.vector(size_t(c.n) * c.proj_stride);
  const std::vector<float> base_scale = rng.vector(c.c), base_bias = rng.vector(c.c);
  std::vector<float> scale_ref, bias_ref;
  for (int img = 0; img < c.n; ++img)
    for (int j = 0; j < c.c; ++j) {
      const double s = c.base_scale ? base_scale[j] : 1.0, t = c.base_bias ? base_bias[j] : 0.0;
      const double first = proj[size_t(img) * c.proj_stride + c.proj_offset + j];
      if (c.with_scale) {
        const double b = proj[size_t(img) * c.proj_stride + c.proj_offset + c.c + j];
        scale_ref.push_back(float(s * (1.0 + first)));
        bias_ref.push_back(float(t * (1.0 + first) + b));
      } else {
        bias_ref.push_back(float(t + first));
      }
    }
  std::vector<float> scale = test::poisoned(size_t(c.n) * c.c), bias = test::poisoned(size_t(c.n) * c.c);
  film_cpu(film_params(c, proj.data(), base_scale.data(), base_bias.data(), scale.data(), bias.data()));
  EXPECT_LE(rel_l2(bias, bias_ref), kTolerance);
  if (c.with_scale) {
    EXPECT_LE(rel_l2(scale, scale_ref), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, TimestepEmbeddingCpu, testing::ValuesIn(timestep_embedding_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, EmbeddingCpu, testing::ValuesIn(embedding_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, FilmCpu, testing::ValuesIn(film_cases()), test::case_name);

#if RTVD_HAS_CUDA
// ---------------------------------------------------------------------------------------------------
// GPU against the CPU references

class TimestepEmbeddingCuda : public test::OnCuda<TimestepEmbeddingCase> {};
class EmbeddingCuda : public test::OnCuda<EmbeddingCase> {};
class FilmCuda : public test::OnCuda<FilmCase> {};

TEST_P(TimestepEmbeddingCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const TimestepEmbeddingCase& c = GetParam();
  const size_t size = size_t(c.n) * c.dim;
  for (float t : timesteps(rng)) {
    SCOPED_TRACE(cat("t ", t));
    const DeviceMemory y = test::poisoned_half(size);
    timestep_embedding(timestep_embedding_params(c, t, y.get()), ctx());
    sync();
    std::vector<float> y_ref(size);
    timestep_embedding_cpu(timestep_embedding_params(c, t, y_ref.data()));
    EXPECT_LE(rel_l2(test::from_device_half(y, size), y_ref), 2e-3);
  }
}

TEST_P(TimestepEmbeddingCuda, RowsAtTheirOwnTimestepsMatchCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const TimestepEmbeddingCase& c = GetParam();
  const size_t size = size_t(c.n) * c.dim;
  const std::vector<float> t = row_timesteps(c, rng);
  const DeviceMemory t_d = test::to_device_float(t);
  const DeviceMemory y = test::poisoned_half(size);
  TimestepEmbeddingParams p = timestep_embedding_params(c, 500.0f, y.get());
  p.timesteps = t_d.as<float>();
  timestep_embedding(p, ctx());
  sync();
  std::vector<float> y_ref(size);
  p.y = y_ref.data();
  p.timesteps = t.data();
  timestep_embedding_cpu(p);
  EXPECT_LE(rel_l2(test::from_device_half(y, size), y_ref), 2e-3);
}

TEST_P(EmbeddingCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const EmbeddingCase& c = GetParam();
  const size_t size = size_t(c.n) * c.dim;
  const test::HalfTensor table = test::half_tensor(rng.vector(size_t(c.rows) * c.dim));
  std::vector<int32_t> ids(c.n);
  for (int32_t& id : ids) id = rng.integer(0, c.rows - 1);
  const DeviceMemory ids_d = test::to_device_bytes(ids.data(), ids.size() * sizeof(int32_t));
  // Accumulating adds to what y holds, so y starts random; otherwise poisoned.
  const test::HalfTensor y = c.accumulate ? test::half_tensor(rng.vector(size)) : test::poisoned_half_tensor(size);
  embedding(embedding_params(c, table.get(), ids_d.as<int32_t>(), y.get()), ctx());
  sync();
  std::vector<float> y_ref = c.accumulate ? y.host : std::vector<float>(size);
  embedding_cpu(embedding_params(c, table.host.data(), ids.data(), y_ref.data()));
  EXPECT_LE(rel_l2(y.read(size), y_ref), 2e-3);
}

TEST_P(FilmCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const FilmCase& c = GetParam();
  const test::HalfTensor proj = test::half_tensor(rng.vector(size_t(c.n) * c.proj_stride));
  std::vector<float> base_scale = rng.vector(c.c, 0.5f, 1.5f), base_bias = rng.vector(c.c);
  const DeviceMemory base_scale_d = test::to_device_float(base_scale), base_bias_d = test::to_device_float(base_bias);
  const size_t size = size_t(c.n) * c.c;
  const DeviceMemory scale = test::poisoned_float(size), bias = test::poisoned_float(size);
  film(film_params(c, proj.get(), base_scale_d.as<float>(), base_bias_d.as<float>(), scale.as<float>(), bias.as<float>()),
       ctx());
  sync();
  std::vector<float> scale_ref(size), bias_ref(size);
  film_cpu(film_params(c, proj.host.data(), base_scale.data(), base_bias.data(), scale_ref.data(), bias_ref.data()));
  // fp32 outputs of identical fp16 inputs: only a contracted multiply-add may differ (1 ulp).
  EXPECT_LE(rel_l2(test::from_device_float(bias, size), bias_ref), 1e-6);
  if (c.with_scale) EXPECT_LE(rel_l2(test::from_device_float(scale, size), scale_ref), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Production, TimestepEmbeddingCuda,
                         testing::ValuesIn(test::production_cases(timestep_embedding_cases())), test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, TimestepEmbeddingCuda, testing::ValuesIn(test::edge_cases(timestep_embedding_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Production, EmbeddingCuda, testing::ValuesIn(test::production_cases(embedding_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, EmbeddingCuda, testing::ValuesIn(test::edge_cases(embedding_cases())), test::case_name);
INSTANTIATE_TEST_SUITE_P(Production, FilmCuda, testing::ValuesIn(test::production_cases(film_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, FilmCuda, testing::ValuesIn(test::edge_cases(film_cases())), test::case_name);

// An id outside [0, rows) cannot be reported from the device: its output row is written as NaN.
TEST(EmbeddingCudaRequirements, OutOfRangeIdWritesNan) {
  RTVD_SKIP_WITHOUT_CUDA();
  CudaHost host;
  test::Rng rng;
  const test::HalfTensor table = test::half_tensor(rng.vector(4 * 8));
  const int32_t ids[2] = {1, 4};
  const DeviceMemory ids_d = test::to_device_bytes(ids, sizeof(ids));
  const test::HalfTensor y = test::half_tensor(std::vector<float>(2 * 8, 0.0f));
  EmbeddingParams p;
  p.table = table.get();
  p.ids = ids_d.as<int32_t>();
  p.y = y.get();
  p.n = 2, p.rows = 4, p.dim = 8;
  embedding(p, host.ctx());
  RTVD_CUDA_CHECK(cudaStreamSynchronize(host.stream()));
  const std::vector<float> out = y.read(16);
  EXPECT_TRUE(test::all_finite({out.begin(), out.begin() + 8}));
  EXPECT_TRUE(std::all_of(out.begin() + 8, out.end(), [](float v) { return std::isnan(v); }));
}

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
