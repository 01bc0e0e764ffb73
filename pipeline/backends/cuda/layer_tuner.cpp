#include "pipeline/backends/cuda/layer_tuner.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "pipeline/backends/cuda/cuda_graph.h"
#include "pipeline/backends/gpu.h"
#include "base/error.h"
#include "pipeline/model_files/cache_dir.h"
#include "pipeline/model_files/half.h"

namespace rtvd {

namespace {

constexpr int kCacheVersion = 6;  // bump when kernels or candidate names change enough to make old entries meaningless
constexpr float kMaxRelL2 = 5e-3f;

// The layer's output, as floats on the host.
std::vector<float> read_output(LayerOutput out, cudaStream_t stream) {
  std::vector<uint16_t> h(out.count);
  RTVD_CUDA_CHECK(cudaMemcpyAsync(h.data(), out.data, out.count * 2, cudaMemcpyDeviceToHost, stream));
  RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> f(out.count);
  // Millions of values per layer, twice or more per tuned shape: on every core, it is load time.
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < out.count; ++i) f[i] = half_to_float(h[i]);
  return f;
}

// Relative L2 distance of a from the reference b; NaN or infinity in either makes it infinite.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  bool finite = true;
#pragma omp parallel for schedule(static) reduction(+ : num, den) reduction(&& : finite)
  for (size_t i = 0; i < a.size(); ++i) {
    finite = finite && std::isfinite(a[i]) && std::isfinite(b[i]);
    num += double(a[i] - b[i]) * (a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return finite ? std::sqrt(num / std::max(den, 1e-30)) : INFINITY;
}

// A candidate's runs as they run in a frame: captured into a CUDA graph (kRepeats runs back to back),
// so that host-side launch cost (large for library calls) is not counted. Owns the executable graph.
class TimedRuns {
 public:
  static constexpr int kRepeats = 2;
  TimedRuns(const std::function<void()>& run, cudaStream_t stream)
      : stream_(stream), exec_(capture_graph(stream, [&] {
          for (int i = 0; i < kRepeats; ++i) run();
        })) {}
  TimedRuns(TimedRuns&& o) noexcept : stream_(o.stream_), exec_(std::exchange(o.exec_, nullptr)) {}
  TimedRuns& operator=(TimedRuns&&) = delete;
  ~TimedRuns() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  // Median ms of one run over `replays` replays, after one that pays the graph's first-launch cost.
  float median_ms(int warmups, int replays) const {
    return float(cuda_median_ms(stream_, warmups, replays, [&] { RTVD_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }) /
                 kRepeats);
  }

 private:
  cudaStream_t stream_;
  cudaGraphExec_t exec_;
};

// Screening times every candidate from one replay; those within kFinalistSlack of the fastest are timed
// again over kFinalReplays (the first load's tuning time is mostly these runs).
constexpr float kFinalistSlack = 1.1f;
constexpr float kSwitchGain = 0.97f;
constexpr int kFinalReplays = 3;

}  // namespace

std::string default_tuning_cache_path() {
  const std::string dir = rtvd_cache_dir();
  return dir.empty() ? dir : dir + "/autotune.json";
}

LayerTuner::LayerTuner(std::string cache_path, std::string device_key)
    : path_(std::move(cache_path)), device_key_(std::move(device_key)) {
  if (path_.empty()) return;
  std::ifstream in(path_);
  if (!in) return;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != kCacheVersion || !j.contains("layers") ||
      !j["layers"].is_object())
    return;
  for (const auto& [key, v] : j["layers"].items()) {
    try {
      TunedChoice c;
      c.impl = v.at("impl").get<std::string>();
      c.ms = v.value("ms", 0.0f);
      choices_[key] = c;
    } catch (const std::exception&) {
      // A malformed entry is re-tuned.
    }
  }
}

const TunedChoice* LayerTuner::cached(const std::string& layer_key) const {
  const auto it = choices_.find(device_key_ + "|" + layer_key);
  return it == choices_.end() ? nullptr : &it->second;
}

TunedChoice LayerTuner::tune(const std::string& layer_key, LayerOutput out, const std::vector<LayerCandidate>& candidates,
                             const std::function<const CudaContext&(size_t)>& workspace) {
  if (candidates.empty()) fail("autotune: no candidate for ", layer_key);
  // Time every candidate that runs, then check outputs fastest first until one matches the reference:
  // reading an output back costs more than timing, so only the winner's usually is.
  // Grown once, up front: the candidates' graphs hold its address until the finalists' replays.
  size_t most = 0;
  for (const LayerCandidate& c : candidates) most = std::max(most, c.workspace_bytes);
  workspace(most);
  candidates[0].run(workspace(candidates[0].workspace_bytes));
  const std::vector<float> reference = read_output(out, workspace(0).stream);
  std::vector<std::pair<float, size_t>> timed;  // (ms, candidate)
  std::vector<TimedRuns> runs;                  // per timed candidate
  TunedChoice best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const LayerCandidate& c = candidates[i];
    const CudaContext& ctx = workspace(c.workspace_bytes);
    try {
      c.run(ctx);  // warm-up (and lazy module loading)
    } catch (const Error& e) {
      if (i == 0) throw;  // the reference must run
      best.rejected.push_back(cat(c.name, ": ", e.what()));  // e.g. a tile too big for this GPU
      continue;
    }
    try {
      runs.emplace_back([&] { c.run(ctx); }, ctx.stream);
    } catch (const Error& e) {  // it ran eagerly but can't be captured: it could not run in a frame
      if (i == 0) throw;
      best.rejected.push_back(cat(c.name, ": ", e.what()));
      continue;
    }
    timed.emplace_back(runs.back().median_ms(1, 1), i);
  }
  const float fastest = std::min_element(timed.begin(), timed.end())->first;
  for (size_t r = 0; r < timed.size(); ++r) {
    auto& [ms, i] = timed[r];
    if (ms <= fastest * kFinalistSlack) ms = runs[r].median_ms(0, kFinalReplays);
    best.timings.emplace_back(candidates[i].name, ms);
  }
  runs.clear();
  // Fastest first, the reference ahead of any candidate less than kSwitchGain faster: timing noise alone
  // should not move a layer off our default (or cuBLASLt's first choice).
  const auto rank = [](const std::pair<float, size_t>& t) { return t.second == 0 ? t.first * kSwitchGain : t.first; };
  std::sort(timed.begin(), timed.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  for (const auto& [ms, i] : timed) {
    const LayerCandidate& c = candidates[i];
    if (i > 0) {
      c.run(workspace(c.workspace_bytes));
      const double err = rel_l2(read_output(out, workspace(0).stream), reference);
      if (!(err <= kMaxRelL2)) {
        best.rejected.push_back(cat(c.name, ": relative L2 ", err, " from ", candidates[0].name));
        continue;
      }
    }
    best.impl = c.name;
    best.ms = ms;
    break;
  }
  if (best.ms == 0) fail("autotune: ", candidates[0].name, " of ", layer_key, " failed its own check");
  candidates[0].run(workspace(candidates[0].workspace_bytes));  // the output as the reference computed it
  choices_[device_key_ + "|" + layer_key] = best;
  ++tuned_;
  return best;
}

void LayerTuner::save() {
  if (path_.empty() || tuned_ == 0) return;
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [key, c] : choices_) {
    nlohmann::json v = {{"impl", c.impl}, {"ms", c.ms}};
    for (const auto& [what, ms] : c.timings) v["timings_ms"][what] = ms;  // why this one: what the others took
    if (!c.rejected.empty()) v["rejected"] = c.rejected;
    layers[key] = v;
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  const std::string tmp = cat(path_, ".tmp", ::getpid());
  {
    std::ofstream out(tmp);
    if (!out) return;
    out << nlohmann::json{{"version", kCacheVersion}, {"layers", layers}}.dump(1) << "\n";
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path_, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  tuned_ = 0;
}

}  // namespace rtvd
