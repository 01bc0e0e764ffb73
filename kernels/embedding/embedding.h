// Conditioning ops, run once per denoising step: the sinusoidal timestep embedding, the class
// embedding lookup and the FiLM combine that turns a time projection into per-image conv scale/bias.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

// diffusers get_timestep_embedding: half = dim / 2, freq[i] = exp(-ln(max_period) * i / (half - freq_shift)),
// y = [sin(t freq) | cos(t freq)], or [cos | sin] when flip_sin_to_cos. Every row gets the same t, or its own
// from timesteps (SDXL's time ids: sizes and crops, one embedding each).
struct TimestepEmbeddingParams {
  void* y = nullptr;  // (n, dim)
  int n = 0, dim = 0;
  float timestep = 0.0f;
  const float* timesteps = nullptr;  // (n): each row's t in place of timestep, or null
  bool flip_sin_to_cos = true;
  float freq_shift = 0.0f;
  float max_period = 10000.0f;
};

// y[i] = table[ids[i]] (+ y[i] when accumulate).
struct EmbeddingParams {
  const void* table = nullptr;  // (rows, dim)
  const int32_t* ids = nullptr;  // (n), each in [0, rows)
  void* y = nullptr;             // (n, dim)
  int n = 0, rows = 0, dim = 0;
  bool accumulate = false;
};

// Per-image conv epilogue from a time projection p (n, proj_stride), this block's slice at proj_offset:
//   with_scale (BatchNorm blocks, p = [g | b] of 2c): scale = s[c] (1 + g), bias = t[c] (1 + g) + b
//   otherwise  (GroupNorm blocks, p = [b] of c):      scale unused,         bias = t[c] + b
// s, t: folded BatchNorm scale/shift, or null s and the conv bias as t.
struct FilmParams {
  const void* proj = nullptr;
  int proj_stride = 0, proj_offset = 0;
  const float* base_scale = nullptr;  // (c) or null = 1
  const float* base_bias = nullptr;   // (c) or null = 0
  float* scale = nullptr;             // (n, c), written when with_scale
  float* bias = nullptr;              // (n, c)
  int n = 0, c = 0;
  bool with_scale = false;
};

void timestep_embedding_cpu(const TimestepEmbeddingParams& p);
void embedding_cpu(const EmbeddingParams& p);
void film_cpu(const FilmParams& p);

}  // namespace rtvd
