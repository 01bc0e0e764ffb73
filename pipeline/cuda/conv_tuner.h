// Per-layer choice of the convolution implementation for `--kernels auto`. Every candidate (each tile
// config and split-K factor of the custom implicit GEMM that can run the layer, and cuDNN) runs the
// layer once on its real inputs, is checked against the custom kernel's default config, and is timed;
// the fastest correct one is kept. Choices are cached on disk keyed by GPU, driver, library versions and
// layer shape, so a later load of the same model times nothing.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/conv2d.cuh"
#include "kernels/cuda_context.cuh"

namespace rtvd {

struct ConvChoice {
  bool cudnn = false;
  Conv2dConfig config;  // when !cudnn
  float ms = 0;         // measured time of the layer when chosen (0: not timed, e.g. forced)
  std::vector<std::pair<std::string, float>> timings;  // every candidate's time when tuned (for the cache file)
  std::vector<std::string> rejected;                   // candidates that failed to run or to match, and why
  std::string describe() const;  // "custom igemm128x160" / "custom igemm64x64 split-k 4" / "cuDNN"
};

// The shape and fused parts of a conv that decide which implementation is fastest (pointers ignored).
std::string conv_shape_key(const Conv2dParams& p);

// $RTVD_CACHE_DIR, else $XDG_CACHE_HOME/rtvd, else $HOME/.cache/rtvd; plus "/conv-autotune.json".
// Empty when none of them is set.
std::string default_tuning_cache_path();

// One way to run a layer: what it is, the scratch it needs and how to launch it.
struct ConvCandidate {
  ConvChoice choice;
  size_t workspace_bytes = 0;
  std::function<void(const Conv2dParams&, const CudaContext&)> run;
};

// The custom kernel's candidates for p: its default config first (the reference the others are checked
// against), then every other tile config and split-K factor that can run p.
std::vector<ConvCandidate> custom_conv_candidates(const Conv2dParams& p, const CudaContext& ctx);

class ConvTuner {
 public:
  // device_key names the GPU, driver and library versions; entries made under another key are kept in
  // the file but never used. An unreadable or malformed cache file is treated as empty.
  ConvTuner(std::string cache_path, std::string device_key);

  // The cached choice for this shape, if any.
  const ConvChoice* cached(const Conv2dParams& p) const;

  // Times every candidate on p's real inputs (replays of a CUDA graph of two runs, as in a frame: one
  // replay screens, those within 10% of the fastest get the median of 3 more; p.y is overwritten and must
  // not overlap x or residual) and returns the fastest whose output matches candidates[0]'s (relative L2
  // <= 5e-3, no NaN), remembered for save(). workspace(bytes) returns a context whose scratch holds at
  // least that many bytes (tuning runs at load, never inside a frame).
  ConvChoice tune(const Conv2dParams& p, const std::vector<ConvCandidate>& candidates,
                  const std::function<const CudaContext&(size_t)>& workspace);

  // Writes the cache (a temporary file renamed over the old one) if tune() added entries. Best effort:
  // a cache that can't be written only costs the next load its tuning time.
  void save();

  int tuned_layers() const { return tuned_; }

 private:
  std::string path_, device_key_;
  std::map<std::string, ConvChoice> choices_;  // by device key + "|" + shape key, every device's
  int tuned_ = 0;
};

}  // namespace rtvd
