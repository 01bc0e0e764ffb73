// The elementwise ops' case tables (elementwise_cases.h). Compiled into the CPU kernels library: plain data,
// no kernels.
#include "kernels/elementwise/elementwise_cases.h"

namespace rtvd {

const std::vector<GegluCase>& geglu_cases() {
  static const std::vector<GegluCase> cases = {
      {.name = "sd21_64x64", .rows = 8192, .f = 1280, .production = true},  // 320 -> 2x1280 -> 1280
      {.name = "scaled_1024x1280", .rows = 1024, .f = 1280},
      {.name = "rows64_1280", .rows = 64, .f = 1280},
      {.name = "f40", .rows = 77, .f = 40},
      {.name = "f20", .rows = 33, .f = 20, .hostile = "f % 8 != 0"},
      {.name = "f33", .rows = 7, .f = 33, .hostile = "odd f"},
      {.name = "f7", .rows = 5, .f = 7, .hostile = "odd f"},
      {.name = "one", .rows = 1, .f = 1, .hostile = "a single element"},
      {.name = "misaligned", .rows = 64, .f = 64, .misalign_bytes = 2, .hostile = "x and y only 2-byte aligned"},
  };
  return cases;
}

const std::vector<SiluCase>& silu_cases() {
  static const std::vector<SiluCase> cases = {
      {.name = "sd21_time_embedding", .count = 2 * 1280, .production = true},
      {.name = "count_1m", .count = 1 << 20},
      {.name = "count_1000003", .count = 1000003, .hostile = "a ragged tail"},
      {.name = "count_100003_in_place", .count = 100003, .in_place = true, .hostile = "in place, ragged"},
      {.name = "count_37_in_place", .count = 37, .in_place = true, .hostile = "in place, 37 elements"},
      {.name = "count_7", .count = 7, .hostile = "7 elements"},
      {.name = "one_in_place", .count = 1, .in_place = true, .hostile = "a single element, in place"},
      {.name = "misaligned", .count = 4096, .misalign_bytes = 2, .hostile = "x and y only 2-byte aligned"},
  };
  return cases;
}

const std::vector<Upsample2xCase>& upsample2x_cases() {
  static const std::vector<Upsample2xCase> cases = {
      {.name = "sd_16x16_1280", .n = 2, .h = 16, .w = 16, .c = 1280, .production = true},
      {.name = "sd_32x32_640", .n = 2, .h = 32, .w = 32, .c = 640, .production = true},
      {.name = "scaled_32x32_320", .n = 1, .h = 32, .w = 32, .c = 320},
      {.name = "c4", .n = 2, .h = 3, .w = 5, .c = 4, .hostile = "c 4, odd h and w"},
      {.name = "c7", .n = 2, .h = 3, .w = 5, .c = 7, .hostile = "c 7"},
      {.name = "one_pixel", .n = 1, .h = 1, .w = 1, .c = 8, .hostile = "a single pixel"},
      {.name = "misaligned", .n = 1, .h = 4, .w = 4, .c = 16, .misalign_bytes = 2,
       .hostile = "x and y only 2-byte aligned"},
  };
  return cases;
}

const std::vector<ConcatCase>& concat_cases() {
  static const std::vector<ConcatCase> cases = {
      {.name = "sd_16x16_1280_1280", .pixels = 512, .ca = 1280, .cb = 1280, .production = true},
      {.name = "sd_64x64_640_320", .pixels = 8192, .ca = 640, .cb = 320, .production = true},
      {.name = "scaled_640_320", .pixels = 1024, .ca = 640, .cb = 320},
      {.name = "c4_12", .pixels = 77, .ca = 4, .cb = 12, .hostile = "ca 4"},
      {.name = "c8_3", .pixels = 10, .ca = 8, .cb = 3, .hostile = "cb 3"},
      {.name = "c5_11", .pixels = 35, .ca = 5, .cb = 11, .hostile = "odd ca and cb"},
      {.name = "misaligned", .pixels = 16, .ca = 8, .cb = 8, .misalign_bytes = 2, .hostile = "a only 2-byte aligned"},
  };
  return cases;
}

// TAESD at 512x512: its encoder's input map (x + 1) / 2 of the RGB image, its decoder's 3 tanh(x / 3) of the
// 64x64x4 latents; SD 2.1's largest ControlNet residual at 512x512, batch 2, scaled and added to another's.
const std::vector<ScaleActivationCase>& scale_activation_cases() {
  static const std::vector<ScaleActivationCase> cases = {
      {.name = "taesd_image_to_unit", .count = 512 * 512 * 3, .in_scale = 0.5f, .in_shift = 0.5f, .production = true},
      {.name = "taesd_latent_clamp", .count = 64 * 64 * 4, .in_scale = 1.0f / 3, .out_scale = 3.0f,
       .act = Activation::Tanh, .production = true},
      {.name = "controlnet_residual_sum", .count = 2 * 64 * 64 * 320, .in_scale = 0.7f, .with_residual = true,
       .production = true},
      {.name = "relu_shifted_1000003", .count = 1000003, .in_scale = 2.0f, .in_shift = -0.25f,
       .act = Activation::Relu, .hostile = "a ragged tail"},
      {.name = "silu_in_place_37", .count = 37, .in_scale = -1.5f, .out_scale = 0.5f, .act = Activation::Silu,
       .in_place = true, .hostile = "in place, 37 elements, negative scale"},
      {.name = "gelu_7", .count = 7, .in_shift = 0.125f, .act = Activation::Gelu, .hostile = "7 elements"},
      {.name = "quick_gelu_one", .count = 1, .out_scale = -2.0f, .act = Activation::QuickGelu,
       .hostile = "a single element"},
      {.name = "tanh_misaligned", .count = 4096, .in_scale = 0.25f, .out_scale = 4.0f, .act = Activation::Tanh,
       .misalign_bytes = 2, .hostile = "x and y only 2-byte aligned"},
      {.name = "affine_in_place_misaligned", .count = 1029, .in_scale = 0.5f, .in_shift = 0.5f, .misalign_bytes = 2,
       .in_place = true, .hostile = "in place, 2-byte aligned, ragged"},
      {.name = "residual_in_place_misaligned", .count = 1029, .in_scale = 0.4f, .misalign_bytes = 2, .in_place = true,
       .with_residual = true, .hostile = "a residual, in place, 2-byte aligned, ragged"},
  };
  return cases;
}

GegluParams geglu_params(const GegluCase& c, const void* x, void* y) {
  GegluParams p;
  p.x = x, p.y = y, p.rows = c.rows, p.f = c.f;
  return p;
}

SiluParams silu_params(const SiluCase& c, const void* x, void* y) {
  SiluParams p;
  p.x = x, p.y = c.in_place ? const_cast<void*>(x) : y, p.count = c.count;
  return p;
}

Upsample2xParams upsample2x_params(const Upsample2xCase& c, const void* x, void* y) {
  Upsample2xParams p;
  p.x = x, p.y = y, p.n = c.n, p.h = c.h, p.w = c.w, p.c = c.c;
  return p;
}

ConcatParams concat_params(const ConcatCase& c, const void* a, const void* b, void* y) {
  ConcatParams p;
  p.a = a, p.b = b, p.y = y, p.pixels = c.pixels, p.ca = c.ca, p.cb = c.cb;
  return p;
}

ScaleActivationParams scale_activation_params(const ScaleActivationCase& c, const void* x, void* y,
                                              const void* residual) {
  ScaleActivationParams p;
  p.x = x, p.y = c.in_place ? const_cast<void*>(x) : y, p.count = c.count;
  p.residual = c.with_residual ? residual : nullptr;
  p.in_scale = c.in_scale, p.in_shift = c.in_shift, p.out_scale = c.out_scale, p.act = c.act;
  return p;
}

}  // namespace rtvd
