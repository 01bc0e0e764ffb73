#include "support/test_util.h"

#include <stdlib.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "pipeline/model_files/half.h"

namespace rtvd::test {

namespace {

namespace fs = std::filesystem;

fs::path binary_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot tell where the test binary is (/proc/self/exe: ", ec.message(), ")");
  return self.parent_path();
}

// $variable when set, else fallback; it must be a directory (or a regular file). what: what is looked for;
// copy: what to point the variable at.
std::string located(const char* variable, const fs::path& fallback, bool directory, const char* what,
                    const char* copy) {
  const char* set = std::getenv(variable);
  const bool from_variable = set && *set;
  const fs::path path = from_variable ? fs::path(set) : fallback;
  std::error_code ec;
  if (directory ? fs::is_directory(path, ec) : fs::is_regular_file(path, ec)) return path.string();
  fail(what, ": ", path.string(), from_variable ? cat(" (from ", variable, ")") : "", " is not a ",
       directory ? "directory" : "file", "; set ", variable, " to ", copy, from_variable ? "" : ", or put one there");
}

}  // namespace

std::string test_data_dir() {
  return located("RTVD_TEST_DATA", binary_dir() / "data", true, "the tests' data", "a copy of tests/data");
}

std::string test_data(const std::string& relative) { return test_data_dir() + "/" + relative; }

std::string exported_dir(const std::string& name, std::initializer_list<const char*> files, const char* script) {
  const std::string dir = test_data(name);
  for (const char* file : files)
    if (!std::filesystem::exists(dir + "/" + file)) {
      ADD_FAILURE() << dir << "/" << file << " is missing: run tools/reference/" << script << " (its docstring says "
                    << "how) into tests/data/" << name << " and commit what it writes";
      return "";
    }
  return dir;
}

std::string assets_dir() {
  return located("RTVD_ASSETS", binary_dir() / "assets", true, "the models the tests load", "a copy of assets/");
}

std::string rtvd_binary() {
  return located("RTVD_BINARY", binary_dir().parent_path() / "rtvd", false, "the rtvd binary", "a built rtvd");
}

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

std::vector<float> round_to_half(std::vector<float> v) {
  for (auto& x : v) x = half_to_float(float_to_half(x));
  return v;
}

int significant_digits(const std::string& number) {
  std::string digits;
  for (char c : number)
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  const size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? 0 : int(digits.size() - first);
}

}  // namespace rtvd::test
