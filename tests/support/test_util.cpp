#include "support/test_util.h"

#include <stdlib.h>

#include <cmath>
#include <stdexcept>

namespace rtvd::test {

Rng::Rng() : Rng((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()) {}

float Rng::uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
float Rng::normal() { return std::normal_distribution<float>(0.0f, 1.0f)(gen); }
int Rng::integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }

std::vector<float> Rng::vector(size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = uniform(lo, hi);
  return v;
}

std::vector<float> Rng::normal_vector(size_t n, float stddev) {
  std::vector<float> v(n);
  for (auto& x : v) x = stddev * normal();
  return v;
}

std::string seed_trace(const Rng& r) { return "random seed " + std::to_string(r.seed); }

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= m)) m = d;  // NaN propagates as NaN
  }
  return m;
}

bool all_finite(const std::vector<float>& a) {
  for (float x : a)
    if (!std::isfinite(x)) return false;
  return true;
}

std::vector<float> poisoned(size_t n) { return std::vector<float>(n, kPoison); }

TempDir::TempDir(const std::string& prefix) {
  std::string dir = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
  if (!::mkdtemp(dir.data())) throw std::runtime_error("cannot create a temporary directory " + dir);
  dir_ = dir;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace rtvd::test
