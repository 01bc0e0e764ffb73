// The convolution's side of `--kernels auto` (layer_tuner.h): the choices a conv layer can take, their
// names in the tuning cache, and the custom kernel's candidates.
#pragma once
#include <string>
#include <vector>

#include "kernels/conv2d.cuh"
#include "kernels/cuda_context.cuh"
#include "pipeline/cuda/layer_tuner.h"

namespace rtvd {

struct ConvChoice {
  bool cudnn = false;
  Conv2dConfig config;  // when !cudnn
  std::string describe() const;  // "custom igemm128x160" / "custom igemm64x64 split-k 4" / "cuDNN"
};

// The choice describe() named; throws rtvd::Error for a name it never gives.
ConvChoice conv_choice_named(const std::string& name);

// The shape and fused parts of a conv that decide which implementation is fastest (pointers ignored).
std::string conv_shape_key(const Conv2dParams& p);

// The custom kernel's candidates for p, named by ConvChoice::describe(): its default config first (the
// reference the others are checked against), then every other tile config and split-K factor that can
// run p.
std::vector<LayerCandidate> custom_conv_candidates(const Conv2dParams& p, const CudaContext& ctx);

}  // namespace rtvd
