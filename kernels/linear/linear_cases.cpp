// linear's case table (linear_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/linear/linear_cases.h"

namespace rtvd {

namespace {

constexpr LinearResidual kSeparate = LinearResidual::Separate, kInPlace = LinearResidual::InPlace;
constexpr Activation kSilu = Activation::Silu, kGelu = Activation::Gelu, kQuickGelu = Activation::QuickGelu;
constexpr Activation kRelu = Activation::Relu, kTanh = Activation::Tanh;

std::vector<LinearCase> make_cases() {
  return {
      // ---- production: the SD 2.1 U-Net at 64x64, batch 2 (M = 8192 tokens), its cross-attention keys and
      // values ([k | v] of 2 x 77 context tokens of 1024), and the time embedding (2 rows).
      {.name = "sd21_qkv_64x64", .m = 8192, .n = 960, .k = 320, .production = true},
      {.name = "sd21_to_out_64x64", .m = 8192, .n = 320, .k = 320, .bias = true, .residual = kSeparate,
       .production = true},
      {.name = "sd21_geglu_proj_64x64", .m = 8192, .n = 2560, .k = 320, .bias = true, .production = true},
      {.name = "sd21_ff_out_64x64", .m = 8192, .n = 320, .k = 1280, .bias = true, .residual = kSeparate,
       .production = true},
      {.name = "sd21_cross_kv", .m = 154, .n = 640, .k = 1024, .production = true},
      // The same U-Net at batch 1 (the real-time case), where most outputs' 128 x 128 tiles (in brackets) fill
      // less than a wave of an H100's 132 SMs: the top level's 4096 x 320 feed-forward out, 32x32 latents
      // (1024 tokens, d 640), 16x16 (256, d 1280) and the mid block's 8x8 (64, d 1280).
      {.name = "sd21_b1_ff_out_64x64", .m = 4096, .n = 320, .k = 1280, .bias = true, .residual = kSeparate,
       .production = true},  // [96]
      {.name = "sd21_b1_qkv_32x32", .m = 1024, .n = 1920, .k = 640, .production = true},  // [120]
      {.name = "sd21_b1_to_out_32x32", .m = 1024, .n = 640, .k = 640, .bias = true, .residual = kSeparate,
       .production = true},  // [40]
      {.name = "sd21_b1_ff_out_32x32", .m = 1024, .n = 640, .k = 2560, .bias = true, .residual = kSeparate,
       .production = true},  // [40]
      {.name = "sd21_b1_qkv_16x16", .m = 256, .n = 3840, .k = 1280, .production = true},  // [60]
      {.name = "sd21_b1_proj_in_16x16", .m = 256, .n = 1280, .k = 1280, .bias = true, .production = true},  // [20]
      {.name = "sd21_b1_to_out_16x16", .m = 256, .n = 1280, .k = 1280, .bias = true, .residual = kSeparate,
       .production = true},  // [20]
      {.name = "sd21_b1_geglu_proj_64x64", .m = 4096, .n = 2560, .k = 320, .bias = true, .production = true},  // [320]
      {.name = "sd21_b1_geglu_proj_16x16", .m = 256, .n = 10240, .k = 1280, .bias = true, .production = true},  // [160]
      {.name = "sd21_b1_ff_out_16x16", .m = 256, .n = 1280, .k = 5120, .bias = true, .residual = kSeparate,
       .production = true},  // [20]
      {.name = "sd21_b1_to_q_8x8", .m = 64, .n = 1280, .k = 1280, .production = true},  // [10]
      {.name = "sd21_b1_to_out_8x8", .m = 64, .n = 1280, .k = 1280, .bias = true, .residual = kSeparate,
       .production = true},  // [10]
      {.name = "sd21_b1_ff_out_8x8", .m = 64, .n = 1280, .k = 5120, .bias = true, .residual = kSeparate,
       .production = true},  // [10]
      // SDXL at 1024x1024, batch 1: the transformer GEMMs of its 64x64 (4096 tokens, d 640) and 32x32 (1024, d
      // 1280) levels, where its 70 transformer blocks are.
      {.name = "sdxl_qkv_64x64", .m = 4096, .n = 1920, .k = 640, .production = true},
      {.name = "sdxl_to_out_64x64", .m = 4096, .n = 640, .k = 640, .bias = true, .residual = kSeparate,
       .production = true},
      {.name = "sdxl_geglu_proj_64x64", .m = 4096, .n = 5120, .k = 640, .bias = true, .production = true},
      {.name = "sdxl_ff_out_64x64", .m = 4096, .n = 640, .k = 2560, .bias = true, .residual = kSeparate,
       .production = true},
      {.name = "sdxl_qkv_32x32", .m = 1024, .n = 3840, .k = 1280, .production = true},
      {.name = "sdxl_to_out_32x32", .m = 1024, .n = 1280, .k = 1280, .bias = true, .residual = kSeparate,
       .production = true},
      {.name = "sdxl_geglu_proj_32x32", .m = 1024, .n = 10240, .k = 1280, .bias = true, .production = true},
      {.name = "sdxl_ff_out_32x32", .m = 1024, .n = 1280, .k = 5120, .bias = true, .residual = kSeparate,
       .production = true},
      {.name = "sd21_time_embedding_1", .m = 2, .n = 1280, .k = 320, .bias = true, .act = kSilu, .production = true,
       .hostile = "2 rows: the fallback kernel"},
      // The CLIP text encoders' MLP up-projections (77 tokens per prompt): OpenAI's ViT-L/14 (SD 1.5, width
      // 768, quick GELU) at batch 2 and OpenCLIP's ViT-H/14 (SD 2.1, width 1024, exact GELU) at batch 1.
      {.name = "clip_l_fc1_b2", .m = 154, .n = 3072, .k = 768, .bias = true, .act = kQuickGelu, .production = true},
      {.name = "clip_h_fc1_b1", .m = 77, .n = 4096, .k = 1024, .bias = true, .act = kGelu, .production = true},

      // ---- the production shapes scaled down
      {.name = "rows77_1280", .m = 77, .n = 1280, .k = 1024, .bias = true},
      {.name = "to_out_scaled", .m = 2048, .n = 320, .k = 320, .bias = true, .residual = kSeparate},
      {.name = "geglu_proj_scaled", .m = 512, .n = 2560, .k = 320, .bias = true},
      {.name = "ff_out_scaled", .m = 512, .n = 320, .k = 1280, .bias = true, .residual = kSeparate},
      {.name = "rows77_k1024", .m = 77, .n = 64, .k = 1024},

      // ---- epilogues, in place, ragged and misaligned
      {.name = "in_place_256", .m = 256, .n = 320, .k = 320, .bias = true, .residual = kInPlace,
       .hostile = "y is the residual"},
      {.name = "in_place_m100", .m = 100, .n = 64, .k = 64, .bias = true, .residual = kInPlace,
       .hostile = "y is the residual, m not a tile multiple"},
      {.name = "silu_after_gemm", .m = 64, .n = 64, .k = 64, .bias = true, .residual = kSeparate, .act = kSilu,
       .hostile = "SiLU (then the residual) as a pass after cuBLASLt"},
      {.name = "gelu_then_residual", .m = 154, .n = 3072, .k = 768, .bias = true, .residual = kSeparate, .act = kGelu,
       .hostile = "exact GELU (then the residual) as a pass after cuBLASLt"},
      {.name = "quick_gelu_then_residual", .m = 77, .n = 4096, .k = 1024, .bias = true, .residual = kSeparate,
       .act = kQuickGelu, .hostile = "quick GELU (then the residual) as a pass after cuBLASLt"},
      {.name = "gelu_scaled", .m = 77, .n = 256, .k = 768, .bias = true, .residual = kSeparate, .act = kGelu,
       .hostile = "exact GELU, small enough for the naive CPU check"},
      {.name = "quick_gelu_scaled", .m = 154, .n = 384, .k = 256, .bias = true, .residual = kSeparate,
       .act = kQuickGelu, .hostile = "quick GELU, small enough for the naive CPU check"},
      {.name = "gelu_k20", .m = 33, .n = 24, .k = 20, .bias = true, .residual = kSeparate, .act = kGelu,
       .hostile = "exact GELU in the fallback kernel"},
      {.name = "quick_gelu_3_rows", .m = 3, .n = 64, .k = 40, .bias = true, .act = kQuickGelu,
       .hostile = "quick GELU in the fallback kernel, 3 rows"},
      {.name = "relu_then_residual", .m = 64, .n = 96, .k = 64, .bias = true, .residual = kSeparate, .act = kRelu,
       .hostile = "ReLU (then the residual)"},
      {.name = "tanh_k20", .m = 33, .n = 24, .k = 20, .bias = true, .residual = kSeparate, .act = kTanh,
       .hostile = "tanh in the fallback kernel"},
      {.name = "no_epilogue", .m = 64, .n = 64, .k = 64, .hostile = "no bias, residual or activation"},
      {.name = "n17", .m = 33, .n = 17, .k = 40, .bias = true, .residual = kSeparate,
       .hostile = "n % 8 != 0: the fallback kernel"},
      {.name = "k20", .m = 33, .n = 24, .k = 20, .bias = true, .act = kSilu, .hostile = "k % 8 != 0: the fallback kernel"},
      {.name = "tiny_7x5x3", .m = 7, .n = 5, .k = 3, .residual = kSeparate, .act = kSilu, .hostile = "7 x 5 x 3"},
      {.name = "one_by_one", .m = 1, .n = 1, .k = 1, .hostile = "1 x 1 x 1"},
      {.name = "few_rows_3x700", .m = 3, .n = 200, .k = 700, .bias = true, .residual = kSeparate,
       .hostile = "fewer rows than columns (the CPU splits the columns)"},
      {.name = "odd_37_19_23", .m = 37, .n = 19, .k = 23, .bias = true, .residual = kSeparate,
       .hostile = "every size odd"},
      {.name = "odd_33_40_17", .m = 33, .n = 40, .k = 17, .bias = true, .residual = kSeparate, .act = kSilu,
       .hostile = "k 17"},
      {.name = "misaligned_x", .m = 128, .n = 64, .k = 64, .bias = true, .residual = kSeparate, .x_misalign_bytes = 2,
       .hostile = "x only 2-byte aligned: the fallback kernel"},
  };
}

}  // namespace

const std::vector<LinearCase>& linear_cases() {
  static const std::vector<LinearCase> cases = make_cases();
  return cases;
}

LinearParams linear_params(const LinearCase& c, const void* x, const void* w, const float* bias, const void* residual,
                           void* y) {
  LinearParams p;
  p.x = x, p.w = w, p.y = y;
  p.bias = c.bias ? bias : nullptr;
  p.residual = c.residual == LinearResidual::Separate ? residual : c.residual == LinearResidual::InPlace ? y : nullptr;
  p.m = c.m, p.n = c.n, p.k = c.k;
  p.act = c.act;
  return p;
}

}  // namespace rtvd
