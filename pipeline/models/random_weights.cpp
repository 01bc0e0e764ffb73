#include "pipeline/models/random_weights.h"

#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/checked_math.h"
#include "base/error.h"
#include "pipeline/graph/memory_budget.h"
#include "pipeline/model_files/half.h"
#include "pipeline/models/unet.h"

namespace rtvd {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix64's increment

// splitmix64's output function: a bijection that scrambles every input bit into every output bit.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// value = (center + k) * step, k uniform in [-radius, radius].
struct Distribution {
  int64_t center, radius;
  float step;
};

Distribution distribution_for(const TensorSpec& t) {
  constexpr float kStep = 1.0f / 1024;
  if (t.shape.size() >= 2) {  // conv (o, i, kh, kw) and linear (o, i) weights, embeddings: variance 1/fan_in
    double fan_in = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) fan_in *= double(t.shape[d]);
    return {0, 1024, float(std::sqrt(3.0 / fan_in) / 1024)};
  }
  const std::string_view name = t.name;
  if (name.ends_with(".running_var")) return {1024, 512, kStep};
  if (name.ends_with(".weight")) return {1024, 205, kStep};  // GroupNorm, LayerNorm, BatchNorm scales
  return {0, 102, kStep};                                      // biases, running means
}

}  // namespace

void random_parameter(uint64_t seed, const TensorSpec& spec, uint8_t* out) {
  const Distribution d = distribution_for(spec);
  const uint64_t key = mix(seed ^ fnv1a(spec.name)), levels = uint64_t(2 * d.radius + 1);
  // The few values a tensor can hold, converted once: the loop below only draws and looks up.
  const size_t bytes = dtype_size(spec.dtype);
  std::vector<uint8_t> table(levels * bytes);
  for (uint64_t j = 0; j < levels; ++j) {
    const float v = float(d.center - d.radius + int64_t(j)) * d.step;
    const uint16_t h = float_to_half(v);
    std::memcpy(table.data() + j * bytes, spec.dtype == DType::F32 ? static_cast<const void*>(&v) : &h, bytes);
  }
  const int64_t n = checked_numel(spec.shape, spec.name);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t j = ((mix(key + uint64_t(i + 1) * kGolden) >> 32) * levels) >> 32;  // uniform in [0, levels)
    std::memcpy(out + i * bytes, table.data() + j * bytes, bytes);
  }
}

SafeTensorsFile random_checkpoint(const ModelConfig& cfg, uint64_t seed) {
  if (cfg.dtype != DType::F32 && cfg.dtype != DType::F16)
    fail("random weights of ", cfg.name, ": dtype ", dtype_name(cfg.dtype), ", expected F32 or F16");
  const std::vector<TensorSpec> specs = unet_parameters(cfg);
  const std::string label = cat("random weights of ", cfg.name);
  int64_t bytes = 0;
  for (const TensorSpec& t : specs)
    bytes = checked_add(bytes, checked_numel(t.shape, label, int64_t(dtype_size(t.dtype))), label);
  require_memory(label, bytes, "", host_memory_available());  // before SafeTensorsFile::build maps them
  return SafeTensorsFile::build(cat("random weights of ", cfg.name, " (seed ", seed, ")"), specs,
                                [&](size_t i, uint8_t* out) { random_parameter(seed, specs[i], out); });
}

}  // namespace rtvd
