// The noise source of every frame: a smooth, seeded walk through noise space. Key noises k_j are drawn
// every `period` frames; in between, x = k_j cos(a) + k_{j+1} sin(a) with a eased from 0 to pi/2, which
// keeps each element a unit Gaussian, so every frame is a valid starting point of the sampler.
#pragma once
#include <cstddef>
#include <cstdint>

namespace rtvd {

void noise_walk(uint64_t seed, int64_t frame, int period, float* out, size_t count);

}  // namespace rtvd
