// layer_norm's case table (layer_norm_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/layer_norm/layer_norm_cases.h"

namespace rtvd {

namespace {

std::vector<LayerNormCase> make_cases() {
  return {
      // ---- production: the SD 2.1 transformer blocks at 64x64, 32x32 and 16x16, batch 2
      {.name = "sd21_64x64", .rows = 8192, .c = 320, .production = true},
      {.name = "sd21_32x32", .rows = 2048, .c = 640, .production = true},
      {.name = "sd21_16x16", .rows = 512, .c = 1280, .production = true},

      // ---- text-encoder widths, the register path's limits, hostile rows
      {.name = "rows154_c1024", .rows = 154, .c = 1024},
      {.name = "rows77_c768", .rows = 77, .c = 768},
      {.name = "widest_in_registers", .rows = 33, .c = 1280, .hostile = "the widest row held in registers"},
      {.name = "past_registers_1288", .rows = 9, .c = 1288, .hostile = "past the register path: the scalar kernel"},
      {.name = "c100", .rows = 17, .c = 100, .hostile = "c % 8 != 0: the scalar kernel"},
      {.name = "c7", .rows = 3, .c = 7, .hostile = "c 7"},
      {.name = "misaligned", .rows = 64, .c = 320, .misalign_bytes = 2,
       .hostile = "rows only 2-byte aligned: the scalar kernel"},
      {.name = "mean20", .rows = 128, .c = 640, .offset = 20.0f, .hostile = "a mean of 10 std"},
      {.name = "rows13_c320", .rows = 13, .c = 320, .offset = 5.0f, .stddev = 3.0f},
      {.name = "one_row_c7", .rows = 1, .c = 7, .offset = 5.0f, .stddev = 3.0f, .hostile = "one row of 7"},
      {.name = "rows77_c1024", .rows = 77, .c = 1024, .offset = 5.0f, .stddev = 3.0f},
      {.name = "c1", .rows = 5, .c = 1, .offset = 5.0f, .stddev = 3.0f, .hostile = "one channel: zero variance"},
  };
}

}  // namespace

const std::vector<LayerNormCase>& layer_norm_cases() {
  static const std::vector<LayerNormCase> cases = make_cases();
  return cases;
}

LayerNormParams layer_norm_params(const LayerNormCase& c, const void* x, void* y, const float* gamma,
                                  const float* beta) {
  LayerNormParams p;
  p.x = x, p.y = y, p.gamma = gamma, p.beta = beta;
  p.rows = c.rows, p.c = c.c;
  return p;
}

}  // namespace rtvd
