#include "bench_cache_error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "pipeline/backends/profiler.h"

namespace rtvd {

namespace {

double psnr_db(double mean_square) {
  return mean_square > 0 ? 10.0 * std::log10(255.0 * 255.0 / mean_square) : std::numeric_limits<double>::infinity();
}

// The mean square difference of two RGBA8 frames over R, G and B (alpha is opaque in both).
double mean_square_rgb(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (i % 4 == 3) continue;
    const double d = double(a[i]) - double(b[i]);
    sum += d * d;
  }
  return sum / double(a.size() / 4 * 3);
}

}  // namespace

CacheError feature_cache_error(Engine& engine, FrameSettings settings, BenchSource& source, int frames) {
  settings.skip_similar = 0;  // every frame rendered in both runs
  const auto render = [&](const FrameSettings& s) {
    engine.configure(s, true);
    engine.restart();
    source.rewind();
    std::vector<std::vector<uint8_t>> out;
    for (int i = 0; i < frames; ++i) out.push_back(engine.render(*source.next(1).front()).pixels);
    return out;
  };
  const int64_t full_before = engine.full_frames(), refreshes_before = engine.source_refreshes();
  const std::vector<std::vector<uint8_t>> cached = render(settings);
  CacheError e;
  e.full_frames = engine.full_frames() - full_before;
  e.source_refreshes = engine.source_refreshes() - refreshes_before;
  settings.cache_refresh = 0;
  const std::vector<std::vector<uint8_t>> uncached = render(settings);

  double square_sum = 0, worst_square = 0;
  for (int i = 0; i < frames; ++i) {
    const double square = mean_square_rgb(cached[size_t(i)], uncached[size_t(i)]);
    e.rms_levels.push_back(std::sqrt(square));
    e.psnr_db.push_back(psnr_db(square));
    square_sum += square;
    worst_square = std::max(worst_square, square);
  }
  e.rms_mean = std::accumulate(e.rms_levels.begin(), e.rms_levels.end(), 0.0) / frames;
  e.rms_worst = std::sqrt(worst_square);
  e.psnr_all_db = psnr_db(square_sum / frames);
  e.psnr_worst_db = psnr_db(worst_square);
  return e;
}

std::string CacheError::line() const {
  std::string per_frame;
  for (size_t i = 0; i < rms_levels.size(); ++i)
    per_frame += cat(i ? ", " : "", three_digits(rms_levels[i]), " / ", three_digits(psnr_db[i]));
  return cat("feature cache error against the uncached frames, ", rms_levels.size(),
             " frames of the moving source from the same start (", full_frames, " of them full, ", source_refreshes,
             " of those where the source had moved too far): RMS mean ", three_digits(rms_mean), ", worst ",
             three_digits(rms_worst), " of 255 levels; PSNR ", three_digits(psnr_all_db), " dB over all frames, worst ",
             three_digits(psnr_worst_db), " dB; per frame (RMS / PSNR dB): ", per_frame);
}

nlohmann::json CacheError::json(int refresh) const {
  const auto finite_or_null = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json psnr = nlohmann::json::array();
  for (double v : psnr_db) psnr.push_back(finite_or_null(v));
  return {{"refresh", refresh}, {"error_frames", rms_levels.size()}, {"full_frames", full_frames},
          {"source_refreshes", source_refreshes}, {"rms_levels", rms_levels},
          {"psnr_db", psnr}, {"rms_levels_mean", rms_mean}, {"rms_levels_worst", rms_worst},
          {"psnr_db_all_frames", finite_or_null(psnr_all_db)}, {"psnr_db_worst", finite_or_null(psnr_worst_db)}};
}

}  // namespace rtvd
