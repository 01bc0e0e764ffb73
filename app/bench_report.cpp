#include "bench_report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace rtvd {

std::vector<cli::FlagSpec> with_backend_flags(std::vector<cli::FlagSpec> specs) {
  using K = cli::ValueKind;
  specs.insert(specs.end(), cli::backend_flags().begin(), cli::backend_flags().end());
  specs.insert(specs.end(), {
                                {"json", 0, K::String, "write the results as JSON", "", "FILE"},
                                {"help", 'h', K::None, "show this help", "", ""},
                            });
  return specs;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

void write_json(const std::string& path, const nlohmann::json& doc) {
  std::ofstream f(path);
  if (!(f << doc.dump(2) << "\n")) fail("--json ", path, ": cannot write");
}

// The NVIDIA kernel module's version ("580.159.04"), or "unknown": the first word of the first line made
// of digits and dots ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release ...").
std::string nvidia_driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  std::getline(f, line);
  std::istringstream words(line);
  for (std::string word; words >> word;)
    if (word.find('.') != std::string::npos && word.find_first_not_of("0123456789.") == std::string::npos) return word;
  return "unknown";
}

std::string bundle_commit() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::ifstream f(exe.parent_path() / ".commit");
  std::string commit;
  return f >> commit ? commit : "unknown";
}

nlohmann::json print_slowest_layers(const FrameProfile& profile, const std::vector<Op>& ops, const Backend& backend,
                                    int n, const char* per) {
  std::printf("slowest layers (ms per %s, implementation):\n", per);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [layer, layer_ms] : profile.slowest_layers(n)) {
    size_t i = 0;
    while (i < ops.size() && ops[i].layer != layer) ++i;
    const std::string impl = backend.frame_op_impl(i);
    std::printf("  %-60s %8.3f  %s\n", layer.c_str(), layer_ms, impl.c_str());
    rows.push_back({{"layer", layer}, {"ms", layer_ms}, {"implementation", impl}});
  }
  return rows;
}

std::string against_gemm_peak(double tflops, double flops, const Ceilings& c) {
  if (!c.none.empty()) return "";
  return cat(" = ", int(100 * tflops / c.gemm_tflops + 0.5), "% of the ", three_digits(c.gemm_tflops),
             " TFLOP/s GEMM peak measured now (floor ", three_digits(flops / c.gemm_tflops / 1e9), " ms)");
}

nlohmann::json ceilings_json(const Ceilings& c) {
  if (!c.none.empty()) return {{"none", c.none}};
  return {{"gemm_tflops", c.gemm_tflops}, {"gemm", c.gemm_what}, {"copy_gbps", c.copy_gbps}, {"copy", c.copy_what}};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace rtvd
