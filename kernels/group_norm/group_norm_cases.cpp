// group_norm's case table (group_norm_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/group_norm/group_norm_cases.h"

namespace rtvd {

namespace {

std::vector<GroupNormCase> make_cases() {
  return {
      // ---- production: the SD U-Net's levels at batch 2 (32 groups), as the ResNet and transformer norms run
      {.name = "sd_64x64_320_silu", .hw = 4096, .c = 320, .silu = true, .production = true},
      {.name = "sd_64x64_320_silu_in_place", .hw = 4096, .c = 320, .silu = true, .in_place = true, .offset = 3.0f,
       .production = true, .hostile = "in place: x read after other blocks wrote y"},
      {.name = "sd_64x64_640_stats", .hw = 4096, .c = 640, .stats_only = true, .production = true},
      {.name = "sd_32x32_640_stats", .hw = 1024, .c = 640, .stats_only = true, .production = true},
      {.name = "sd_16x16_1280_silu", .hw = 256, .c = 1280, .silu = true, .production = true},
      {.name = "sd_8x8_1280_stats", .hw = 64, .c = 1280, .stats_only = true, .production = true},
      // batch 1 (the latency-mode frame): the widest input of each of three levels, normalised for a conv's pre-pass
      {.name = "sd_b1_64x64_960_silu", .n = 1, .hw = 4096, .c = 960, .silu = true, .production = true},
      {.name = "sd_b1_16x16_1280_silu", .n = 1, .hw = 256, .c = 1280, .silu = true, .production = true},
      {.name = "sd_b1_8x8_2560_silu", .n = 1, .hw = 64, .c = 2560, .silu = true, .production = true},

      // ---- hostile
      {.name = "widest_concat", .n = 1, .hw = 64, .c = 2560, .silu = true, .hostile = "2560 channels"},
      {.name = "ragged_4097", .n = 1, .hw = 4097, .c = 320, .hostile = "a ragged last chunk"},
      {.name = "single_pixel", .n = 3, .hw = 1, .c = 64, .hostile = "a single pixel"},
      {.name = "c4", .hw = 33, .c = 4, .groups = 2, .silu = true, .hostile = "c 4: 2-channel accesses"},
      {.name = "c30", .n = 1, .hw = 100, .c = 30, .groups = 3, .hostile = "c % 8 != 0"},
      {.name = "c15", .hw = 77, .c = 15, .groups = 5, .silu = true, .hostile = "odd c: scalar accesses"},
      {.name = "mean50", .hw = 512, .c = 320, .offset = 50.0f, .hostile = "|mean| = 50 std"},
      {.name = "small_35px_64", .hw = 35, .c = 64, .silu = true, .stddev = 2.0f},
      {.name = "small_35px_64_stats", .hw = 35, .c = 64, .stats_only = true, .stddev = 2.0f},
      {.name = "small_49px_96", .n = 1, .hw = 49, .c = 96, .stddev = 2.0f},
      {.name = "c12_mean30", .hw = 64, .c = 12, .groups = 4, .silu = true, .offset = 30.0f, .stddev = 2.0f,
       .hostile = "a mean of 15 std"},
      {.name = "tiny_variance", .n = 3, .hw = 17, .c = 40, .groups = 1, .stddev = 3e-3f,
       .hostile = "a variance of the order of eps"},
  };
}

}  // namespace

const std::vector<GroupNormCase>& group_norm_cases() {
  static const std::vector<GroupNormCase> cases = make_cases();
  return cases;
}

GroupNormParams group_norm_params(const GroupNormCase& c, const void* x, void* y, float* stats, const float* gamma,
                                  const float* beta) {
  GroupNormParams p;
  p.x = x;
  p.y = c.stats_only ? nullptr : c.in_place ? const_cast<void*>(x) : y;
  p.stats = stats;
  p.gamma = c.stats_only ? nullptr : gamma;  // statistics alone need no affine
  p.beta = c.stats_only ? nullptr : beta;
  p.n = c.n, p.hw = c.hw, p.c = c.c, p.groups = c.groups;
  p.act = c.silu ? Activation::Silu : Activation::None;
  return p;
}

}  // namespace rtvd
