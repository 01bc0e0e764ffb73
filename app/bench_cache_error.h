// rtvd bench frames --feature-cache N --moving: the feature cache's error against the uncached frames, per frame,
// on the moving source.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_source.h"
#include "pipeline/engine.h"

namespace rtvd {

struct CacheError {
  std::vector<double> rms_levels;  // per frame: RMS difference over R, G and B, in 8-bit levels
  std::vector<double> psnr_db;     // per frame: 10 log10(255^2 / mean square), infinite where the frames are equal
  double rms_mean = 0, rms_worst = 0;
  double psnr_all_db = 0;    // of the mean square over every frame's pixels (finite unless every frame is equal)
  double psnr_worst_db = 0;  // the worst frame's
  int64_t full_frames = 0;       // of the cached run's frames, those that ran the full U-Net
  int64_t source_refreshes = 0;  // of those, the ones whose source had moved too far (--cache-similarity)

  std::string line() const;                 // what bench frames prints
  nlohmann::json json(int refresh) const;  // bench frames' "feature_cache"; an equal frame's PSNR is null
};

// `frames` frames of the source from its frame 0, rendered with `settings` (a feature cache on, the similarity
// filter off) and again with the cache off, each from a restart (the same noise walk from the same seed); the
// cached run's RGBA8 frames against the uncached run's. Leaves the engine configured without the cache.
CacheError feature_cache_error(Engine& engine, FrameSettings settings, BenchSource& source, int frames);

}  // namespace rtvd
