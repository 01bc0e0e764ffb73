// The conditioning ops' cases (sinusoidal timestep embedding, embedding lookup, FiLM combine): the tables
// that the correctness tests (tests/ops/embedding_test.cpp) and the kernel benchmark both run. Production
// shapes (SD's and the default model's time embedding, the default model's class embedding, FiLM of a
// BatchNorm and of a GroupNorm block) and hostile ones (odd sizes, an odd embedding dim, no base vectors).
// Plain C++.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/embedding/embedding.h"

namespace rtvd {

// The timestep is not part of a case: tests try several (0, small, large, 999).
struct TimestepEmbeddingCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int n = 2, dim = 0;
  bool flip_sin_to_cos = true;
  float freq_shift = 0.0f;
  float max_period = 10000.0f;
  bool production = false;
  std::string hostile = "";  // "" for none
};

struct EmbeddingCase {
  std::string name;
  int n = 0, rows = 0, dim = 0;
  bool accumulate = false;  // y += table[id]: y holds a value first
  bool production = false;
  std::string hostile = "";
};

struct FilmCase {
  std::string name;
  int n = 2, c = 0, proj_stride = 0, proj_offset = 0;
  bool with_scale = false;  // BatchNorm blocks: [g | b] of 2c; else GroupNorm blocks: [b] of c
  bool base_scale = false, base_bias = false;
  bool production = false;
  std::string hostile = "";
};

const std::vector<TimestepEmbeddingCase>& timestep_embedding_cases();
const std::vector<EmbeddingCase>& embedding_cases();
const std::vector<FilmCase>& film_cases();

// Each case's params over the caller's buffers: y (n, dim); table (rows, dim), ids (n), y (n, dim); proj
// (n, proj_stride), base_scale and base_bias (c) (ignored when the case has none), scale (n, c) (ignored
// without with_scale) and bias (n, c).
TimestepEmbeddingParams timestep_embedding_params(const TimestepEmbeddingCase& c, float timestep, void* y);
EmbeddingParams embedding_params(const EmbeddingCase& c, const void* table, const int32_t* ids, void* y);
FilmParams film_params(const FilmCase& c, const void* proj, const float* base_scale, const float* base_bias,
                       float* scale, float* bias);

}  // namespace rtvd
