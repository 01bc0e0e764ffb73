// Shared test helpers: where the tests' files are, fresh random inputs every run (seed printed on failure),
// error metrics, poison; and what the op tests (tests/ops) share: their case tables as gtest parameters,
// naive references (the fixture of the tests on the device is cuda_test_util.h's).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/common/activation.h"

namespace rtvd::test {

// What the tests read, found wherever the test binaries are (the build's tests/ folder, or a copy of it
// elsewhere such as the GPU machine's bundle): each from an environment variable when it is set, else
// beside the running test binary, where the build copies it (tests/CMakeLists.txt). Where it is not there,
// throws rtvd::Error with one line naming the path tried and the variable to set.
std::string test_data_dir();                         // $RTVD_TEST_DATA, else <binary's dir>/data: tests/data
std::string test_data(const std::string& relative);  // test_data_dir() + "/" + relative
// tests/data/NAME, written by tools/reference/SCRIPT, when it holds every one of files; else "" and one
// ADD_FAILURE naming the missing file and the script that makes it.
std::string exported_dir(const std::string& name, std::initializer_list<const char*> files, const char* script);
std::string assets_dir();   // $RTVD_ASSETS, else <binary's dir>/assets: the models of assets/ the tests load
std::string rtvd_binary();  // $RTVD_BINARY, else <binary's dir>/../rtvd

// The message of the rtvd::Error that fn throws, or a text that matches none of the expected ones.
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error thrown>";
}

// A generator seeded from std::random_device: every run draws new inputs. The seed is kept so a failure
// can be reproduced: wrap assertions in SCOPED_TRACE(seed_trace(rng_seed)).
struct Rng {
  uint64_t seed;
  std::mt19937_64 gen;
  Rng();
  explicit Rng(uint64_t s) : seed(s), gen(s) {}
  float uniform(float lo = -1.0f, float hi = 1.0f);
  float normal();
  int integer(int lo, int hi);  // inclusive
  std::vector<float> vector(size_t n, float lo = -1.0f, float hi = 1.0f);
  std::vector<float> normal_vector(size_t n, float stddev = 1.0f);
};
std::string seed_trace(const Rng& r);

// ||a - b|| / ||b|| in float64; +inf if any element of a is NaN/inf or the sizes differ.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b);
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
bool all_finite(const std::vector<float>& a);
// A value no correct op writes (quiet NaN): fill outputs with it before a run so every element must be written.
constexpr float kPoison = __builtin_nanf("");
std::vector<float> poisoned(size_t n);

// A fresh directory under the system temp dir, removed with everything in it when destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "rtvd_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& dir() const { return dir_; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

// ---------------------------------------------------------------------------------------------------
// The op tests (tests/ops): each runs an op's case table (kernels/<op>/<op>_cases.h), whose cases have a
// name (their test's name) and say whether the production models use them (production).

// The cases of a table that keep(case) admits, in table order.
template <class Case, class Keep>
std::vector<Case> cases_where(const std::vector<Case>& all, Keep keep) {
  std::vector<Case> out;
  for (const Case& c : all)
    if (keep(c)) out.push_back(c);
  return out;
}
// The production models' cases, and the others: the Production and Edge instantiations.
template <class Case>
std::vector<Case> production_cases(const std::vector<Case>& all) {
  return cases_where(all, [](const Case& c) { return bool(c.production); });
}
template <class Case>
std::vector<Case> edge_cases(const std::vector<Case>& all) {
  return cases_where(all, [](const Case& c) { return !c.production; });
}

// The name generator of INSTANTIATE_TEST_SUITE_P over a case table: each test is named by its case.
struct CaseName {
  template <class Case>
  std::string operator()(const testing::TestParamInfo<Case>& info) const {
    return info.param.name;
  }
};
inline constexpr CaseName case_name{};

// SiLU in float64, for the naive references.
inline double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

// Every activation by its definition, in float64: GELU as PyTorch's F.gelu (erf, no tanh approximation), quick
// GELU as transformers' QuickGELUActivation.
inline double activation_ref(double x, Activation act) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Silu: return silu_ref(x);
    case Activation::Gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::QuickGelu: return x / (1.0 + std::exp(-1.702 * x));
    case Activation::Relu: return x > 0 ? x : 0;
    case Activation::Tanh: return std::tanh(x);
  }
  ADD_FAILURE() << "unknown activation " << int(act);
  return x;
}

// A normalisation case's inputs (group_norm, layer_norm: c.elements(), c.c channels, c.offset, c.stddev):
// x ~ N(offset, stddev); gamma in [0.5, 1.5], beta in [-0.5, 0.5].
struct NormData {
  std::vector<float> x, gamma, beta;
  template <class Case>
  NormData(const Case& c, Rng& rng) {
    x = rng.normal_vector(c.elements(), c.stddev);
    for (float& e : x) e += c.offset;
    gamma = rng.vector(c.c, 0.5f, 1.5f);
    beta = rng.vector(c.c, -0.5f, 0.5f);
  }
};

// The values fp16 storage would hold: inputs for the CPU reference, so that both sides see the same numbers.
std::vector<float> round_to_half(std::vector<float> v);

// The significant digits a number is written with ("0.0387": 3, "1.50": 3): its digits from the first
// non-zero one, the point left out.
int significant_digits(const std::string& number);


}  // namespace rtvd::test
