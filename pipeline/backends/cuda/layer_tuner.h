// Per-layer choice of implementation for `--kernels auto`. Every candidate that can run a layer (our
// kernels' configs and the library's version) runs it once on its real inputs, is checked against the
// first candidate (our default), and is timed; the fastest correct one is kept. Choices are cached on
// disk keyed by GPU, driver, library versions and layer shape, so a later load of the same model times
// nothing. The candidates of each op come from its own folder (kernels/<op>/<op>_candidates.cuh), through
// layer_choices.h.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/cuda_context.cuh"

namespace rtvd {

struct TunedChoice {
  std::string impl;  // the chosen candidate's name
  float ms = 0;      // its measured time
  std::vector<std::pair<std::string, float>> timings;  // every candidate's time when tuned (for the cache file)
  std::vector<std::string> rejected;                   // candidates that failed to run or to match, and why
};

// One way to run a layer: its name (unique among the layer's candidates, kept in the cache), the
// scratch it needs and how to launch it on a context whose workspace holds that much.
struct LayerCandidate {
  std::string name;
  size_t workspace_bytes = 0;
  std::function<void(const CudaContext&)> run;
};

// The fp16 output every candidate of a layer writes, compared between them.
struct LayerOutput {
  const void* data = nullptr;
  size_t count = 0;  // fp16 elements
};

// $RTVD_CACHE_DIR, else $XDG_CACHE_HOME/rtvd, else $HOME/.cache/rtvd; plus "/autotune.json".
// Empty when none of them is set.
std::string default_tuning_cache_path();

class LayerTuner {
 public:
  // device_key names the GPU, driver and library versions; entries made under another key are kept in
  // the file but never used. An unreadable or malformed cache file is treated as empty.
  LayerTuner(std::string cache_path, std::string device_key);

  // The cached choice for this layer shape (a key naming everything that decides the fastest), if any.
  const TunedChoice* cached(const std::string& layer_key) const;

  // Times every candidate on the layer's real inputs (replays of a CUDA graph of two runs, as in a frame:
  // one replay screens, those within 10% of the fastest get the median of 3 more; the output is
  // overwritten and must not overlap the inputs) and returns the fastest whose output matches
  // candidates[0]'s (relative L2 <= 5e-3, no NaN), remembered for save(). candidates[0] stays unless
  // another is at least 3% faster. The output is left as
  // candidates[0] computes it. workspace(bytes) returns a context whose scratch holds at least that many
  // bytes (tuning runs at load, never inside a frame).
  TunedChoice tune(const std::string& layer_key, LayerOutput out, const std::vector<LayerCandidate>& candidates,
                   const std::function<const CudaContext&(size_t)>& workspace);

  // Writes the cache (a temporary file renamed over the old one) if tune() added entries. Best effort:
  // a cache that can't be written only costs the next load its tuning time.
  void save();

 private:
  std::string path_, device_key_;
  std::map<std::string, TunedChoice> choices_;  // by device key + "|" + layer key, every device's
  int tuned_ = 0;
};

}  // namespace rtvd
