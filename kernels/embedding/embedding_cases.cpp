// The conditioning ops' case tables (embedding_cases.h). Compiled into the CPU kernels library: plain data,
// no kernels.
#include "kernels/embedding/embedding_cases.h"

namespace rtvd {

const std::vector<TimestepEmbeddingCase>& timestep_embedding_cases() {
  static const std::vector<TimestepEmbeddingCase> cases = {
      {.name = "sd_320", .dim = 320, .production = true},
      {.name = "default_32", .dim = 32, .production = true},
      {.name = "n3_256", .n = 3, .dim = 256},
      {.name = "sdxl_time_ids_256", .n = 12, .dim = 256, .production = true},  // 2 images x 6 time ids
      {.name = "noflip_shift1_1280", .dim = 1280, .flip_sin_to_cos = false, .freq_shift = 1.0f},
      {.name = "odd_dim_33", .dim = 33, .flip_sin_to_cos = false, .freq_shift = 1.0f,
       .hostile = "odd dim: the last element is zero"},
      {.name = "odd_dim_321", .n = 1, .dim = 321, .flip_sin_to_cos = false, .freq_shift = 1.0f,
       .hostile = "odd dim: the last element is zero"},
      {.name = "period100_dim8", .dim = 8, .flip_sin_to_cos = false, .freq_shift = 0.5f, .max_period = 100.0f,
       .hostile = "a fractional shift, another period"},
  };
  return cases;
}

const std::vector<EmbeddingCase>& embedding_cases() {
  static const std::vector<EmbeddingCase> cases = {
      {.name = "default_class", .n = 2, .rows = 11, .dim = 128, .accumulate = true, .production = true},
      {.name = "dim1280", .n = 5, .rows = 10, .dim = 1280},
      {.name = "dim1280_accumulate", .n = 5, .rows = 10, .dim = 1280, .accumulate = true},
      {.name = "dim13_accumulate", .n = 3, .rows = 4, .dim = 13, .accumulate = true, .hostile = "dim 13"},
      {.name = "dim8_more_ids_than_rows", .n = 6, .rows = 3, .dim = 8, .hostile = "more ids than rows"},
      {.name = "dim7", .n = 5, .rows = 10, .dim = 7, .hostile = "dim 7"},
      {.name = "dim7_accumulate", .n = 5, .rows = 10, .dim = 7, .accumulate = true, .hostile = "dim 7"},
  };
  return cases;
}

const std::vector<FilmCase>& film_cases() {
  static const std::vector<FilmCase> cases = {
      {.name = "batch_norm_block", .c = 320, .proj_stride = 3000, .proj_offset = 640, .with_scale = true,
       .base_scale = true, .base_bias = true, .production = true},  // [g | b] slice of the joint projection
      {.name = "group_norm_block", .c = 1280, .proj_stride = 1280, .with_scale = false, .base_bias = true,
       .production = true},  // the conv bias as t
      {.name = "odd_scale_no_base", .n = 3, .c = 17, .proj_stride = 40, .proj_offset = 3, .with_scale = true,
       .hostile = "odd sizes, no base vectors"},
      {.name = "bias_only", .n = 1, .c = 9, .proj_stride = 9, .hostile = "no scale, no base vectors"},
      {.name = "c6_scale_base", .c = 6, .proj_stride = 40, .proj_offset = 9, .with_scale = true, .base_scale = true,
       .base_bias = true},
      {.name = "c6_scale", .c = 6, .proj_stride = 40, .proj_offset = 9, .with_scale = true},
      {.name = "c6_base", .c = 6, .proj_stride = 40, .proj_offset = 9, .base_bias = true},
      {.name = "c6", .c = 6, .proj_stride = 40, .proj_offset = 9},
  };
  return cases;
}

TimestepEmbeddingParams timestep_embedding_params(const TimestepEmbeddingCase& c, float timestep, void* y) {
  TimestepEmbeddingParams p;
  p.y = y, p.n = c.n, p.dim = c.dim, p.timestep = timestep;
  p.flip_sin_to_cos = c.flip_sin_to_cos, p.freq_shift = c.freq_shift, p.max_period = c.max_period;
  return p;
}

EmbeddingParams embedding_params(const EmbeddingCase& c, const void* table, const int32_t* ids, void* y) {
  EmbeddingParams p;
  p.table = table, p.ids = ids, p.y = y, p.n = c.n, p.rows = c.rows, p.dim = c.dim, p.accumulate = c.accumulate;
  return p;
}

FilmParams film_params(const FilmCase& c, const void* proj, const float* base_scale, const float* base_bias,
                       float* scale, float* bias) {
  FilmParams p;
  p.proj = proj, p.proj_stride = c.proj_stride, p.proj_offset = c.proj_offset;
  p.base_scale = c.base_scale ? base_scale : nullptr;
  p.base_bias = c.base_bias ? base_bias : nullptr;
  p.scale = c.with_scale ? scale : nullptr;
  p.bias = bias;
  p.n = c.n, p.c = c.c, p.with_scale = c.with_scale;
  return p;
}

}  // namespace rtvd
