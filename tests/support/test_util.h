// Shared test helpers: fresh random inputs every run (seed printed on failure), error metrics, poison.
#pragma once
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "pipeline/error.h"

namespace rtvd::test {

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

}  // namespace rtvd::test
