// Random weights for a config, for benchmarks and for tests at sizes too large to commit: every parameter
// of the architecture drawn from a counter-based generator, so that each value depends only on (seed,
// parameter name, element index) — the same on any number of threads, and the same as
// tools/reference/random_weights.py, whose weights the PyTorch goldens of such models use.
//
// Distributions keep activations O(1) through a deep network in fp16: conv and linear weights uniform with
// variance 1/fan_in, norm scales 1 ± 0.2, running variances in [0.5, 1.5], biases and means within ±0.1.
// Values are integers times a per-tensor float step, so one float multiply makes each value in both
// implementations, bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/safetensors.h"

namespace rtvd {

// Writes the tensor's values to `out` in its dtype, F32 or F16 (rounded to nearest even).
void random_parameter(uint64_t seed, const TensorSpec& spec, uint8_t* out);

// A checkpoint in memory holding every parameter of cfg's architecture in cfg.dtype (all cores).
SafeTensorsFile random_checkpoint(const ModelConfig& cfg, uint64_t seed);

}  // namespace rtvd
