// conv2d's case table (conv2d_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/conv2d/conv2d_cases.h"

namespace rtvd {

namespace {

constexpr ConvRows kChannel = ConvRows::Channel, kImage = ConvRows::Image;
constexpr Activation kSilu = Activation::Silu, kRelu = Activation::Relu;

std::vector<Conv2dCase> make_cases() {
  return {
      // ---- production: the SD U-Net's hot 3x3 convs at batch 2 as it runs them (FiLM bias, SiLU,
      // the skip connection, the GroupNorm prologue), and the default model's convs (folded BatchNorm
      // scale, FiLM bias, SiLU) at its three levels.
      {.name = "sd_64x64_320_film_silu", .h = 64, .w = 64, .c_in = 320, .c_out = 320, .bias = kImage, .act = kSilu,
       .production = true},
      {.name = "sd_64x64_320_film_silu_res", .h = 64, .w = 64, .c_in = 320, .c_out = 320, .residual = true,
       .bias = kImage, .act = kSilu, .production = true},
      {.name = "sd_64x64_320_gn_film_res", .h = 64, .w = 64, .c_in = 320, .c_out = 320, .residual = true,
       .bias = kImage, .gn_groups = 32, .production = true},
      {.name = "sd_32x32_640_film_silu", .h = 32, .w = 32, .c_in = 640, .c_out = 640, .bias = kImage, .act = kSilu,
       .production = true},
      {.name = "sd_32x32_640_gn_film_res", .h = 32, .w = 32, .c_in = 640, .c_out = 640, .residual = true,
       .bias = kImage, .gn_groups = 32, .production = true},
      {.name = "sd_16x16_1280_film_silu", .h = 16, .w = 16, .c_in = 1280, .c_out = 1280, .bias = kImage,
       .act = kSilu, .production = true},
      {.name = "sd_16x16_1280_film_res", .h = 16, .w = 16, .c_in = 1280, .c_out = 1280, .residual = true,
       .bias = kImage, .production = true},
      {.name = "sd_16x16_1280_gn_film_res", .h = 16, .w = 16, .c_in = 1280, .c_out = 1280, .residual = true,
       .bias = kImage, .gn_groups = 32, .production = true},
      // The real-time frame's U-Net at batch 1 on its two lowest levels: 64 and 256 output pixels, 30-60 MB of
      // weights (an up block's conv1 over the skip's 2560 channels; a ResNet's conv2).
      {.name = "sd_b1_8x8_2560_1280_gn_film", .n = 1, .h = 8, .w = 8, .c_in = 2560, .c_out = 1280, .bias = kImage,
       .gn_groups = 32, .production = true},
      {.name = "sd_b1_16x16_1280_gn_res", .n = 1, .h = 16, .w = 16, .c_in = 1280, .c_out = 1280, .residual = true,
       .bias = kChannel, .gn_groups = 32, .production = true},
      {.name = "default_64x64_32", .h = 64, .w = 64, .c_in = 32, .c_out = 32, .scale = kChannel, .bias = kImage,
       .act = kSilu, .production = true},
      {.name = "default_32x32_64", .h = 32, .w = 32, .c_in = 64, .c_out = 64, .residual = true, .scale = kChannel,
       .bias = kImage, .act = kSilu, .production = true},
      {.name = "default_16x16_96", .h = 16, .w = 16, .c_in = 96, .c_out = 96, .residual = true, .scale = kChannel,
       .bias = kImage, .act = kSilu, .production = true},

      // ---- the autoencoders at 512x512, batch 1: the SD VAE's ResNet conv at the decoder's top level (the
      // GroupNorm prologue, the skip connection) and its first Downsample2D (stride 2, zeros only after the
      // input); TAESD's block convs (ReLU, and ReLU after the skip connection).
      {.name = "vae_512x512_128_gn_res", .n = 1, .h = 512, .w = 512, .c_in = 128, .c_out = 128, .residual = true,
       .bias = kChannel, .gn_groups = 32, .production = true},
      {.name = "vae_downsample_512x512_128", .n = 1, .h = 512, .w = 512, .c_in = 128, .c_out = 128, .stride = 2,
       .pad = 0, .pad_end = 1, .bias = kChannel, .production = true},
      {.name = "taesd_512x512_64_relu", .n = 1, .h = 512, .w = 512, .c_in = 64, .c_out = 64, .bias = kChannel,
       .act = kRelu, .production = true},
      {.name = "taesd_512x512_64_res_relu", .n = 1, .h = 512, .w = 512, .c_in = 64, .c_out = 64, .residual = true,
       .act_after_residual = true, .bias = kChannel, .act = kRelu, .production = true},
      // Their first convs, from 3 channels (the stem kernel's): TAESD's encoder's and the SD VAE's conv_in.
      {.name = "taesd_conv_in_512x512_3_64", .n = 1, .h = 512, .w = 512, .c_in = 3, .c_out = 64, .bias = kChannel,
       .production = true},
      {.name = "vae_conv_in_512x512_3_128", .n = 1, .h = 512, .w = 512, .c_in = 3, .c_out = 128, .bias = kChannel,
       .production = true},
      // Their last convs, to 3 channels (the narrow kernel's): the SD VAE's conv_out with the GroupNorm
      // prologue, TAESD's decoder's last.
      {.name = "vae_conv_out_512x512_128_3_gn", .n = 1, .h = 512, .w = 512, .c_in = 128, .c_out = 3, .bias = kChannel,
       .gn_groups = 32, .production = true},
      {.name = "taesd_conv_out_512x512_64_3", .n = 1, .h = 512, .w = 512, .c_in = 64, .c_out = 3, .bias = kChannel,
       .production = true},

      // ---- the production convs scaled down (split-K territory)
      {.name = "sd_scaled_16x16_320", .h = 16, .w = 16, .c_in = 320, .c_out = 320, .residual = true, .bias = kImage,
       .act = kSilu},
      {.name = "sd_scaled_8x8_320_gn", .h = 8, .w = 8, .c_in = 320, .c_out = 320, .bias = kImage, .act = kSilu,
       .gn_groups = 32},
      {.name = "sd_scaled_8x8_640_gn", .h = 8, .w = 8, .c_in = 640, .c_out = 640, .bias = kImage, .gn_groups = 32},
      {.name = "sd_scaled_8x8_640_gn_silu_res", .h = 8, .w = 8, .c_in = 640, .c_out = 640, .residual = true,
       .bias = kImage, .act = kSilu, .gn_groups = 32},
      {.name = "sd_scaled_4x4_1280_gn", .h = 4, .w = 4, .c_in = 1280, .c_out = 1280, .residual = true,
       .bias = kImage, .act = kSilu, .gn_groups = 32},
      {.name = "sd_scaled_4x4_1280_plain", .h = 4, .w = 4, .c_in = 1280, .c_out = 1280,
       .hostile = "K 11520 over 32 pixels: split-K's workspace"},
      {.name = "sd_16x16_1280_640_gn", .h = 16, .w = 16, .c_in = 1280, .c_out = 640, .residual = true,
       .bias = kChannel, .gn_groups = 32},
      {.name = "default_scaled_8x8_32", .h = 8, .w = 8, .c_in = 32, .c_out = 32, .bias = kChannel, .act = kSilu},
      {.name = "scaled_16x16_128", .h = 16, .w = 16, .c_in = 128, .c_out = 128, .residual = true, .scale = kChannel,
       .bias = kImage, .act = kSilu},
      {.name = "plain_8x8_32", .h = 8, .w = 8, .c_in = 32, .c_out = 32, .hostile = "no epilogue at all"},
      {.name = "plain_32x32_64", .h = 32, .w = 32, .c_in = 64, .c_out = 64, .hostile = "no epilogue at all"},
      {.name = "wide_3x256_64_res_relu", .h = 3, .w = 256, .c_in = 64, .c_out = 64, .residual = true,
       .act_after_residual = true, .bias = kChannel, .act = kRelu,
       .hostile = "rows wider than a wgmma tile: a tile is part of a row, its neighbours' columns the padding"},
      {.name = "wide_2x384_128_96_gn", .n = 1, .h = 2, .w = 384, .c_in = 128, .c_out = 96, .bias = kChannel,
       .gn_groups = 32, .hostile = "rows of three 128-pixel tiles, c_out not a multiple of the tile's"},

      // ---- first and last layers: 3 and 4 channels
      {.name = "c3_first_layer", .n = 1, .h = 7, .w = 5, .c_in = 3, .c_out = 8,
       .hostile = "c_in 3: the stem kernel, and the direct one"},
      {.name = "c3_s2_film_res", .n = 1, .h = 9, .w = 7, .c_in = 3, .c_out = 16, .stride = 2, .residual = true,
       .scale = kImage, .bias = kImage, .act = kSilu, .hostile = "c_in 3, stride 2: the direct kernel"},
      {.name = "stem_c3_72_film_res_silu", .h = 9, .w = 70, .c_in = 3, .c_out = 72, .residual = true,
       .scale = kImage, .bias = kImage, .act = kSilu,
       .hostile = "c_in 3 to 72: a second pass of 8 channels, rows past one 64-pixel tile, a last row tile of one"},
      {.name = "stem_c1_pad_end_in_place", .n = 1, .h = 5, .w = 6, .c_in = 1, .c_out = 16, .pad_end = 2,
       .residual = true, .act_after_residual = true, .bias = kChannel, .act = kRelu, .in_place = true,
       .hostile = "c_in 1, one more row and column of zeros after the input, y is the residual"},
      {.name = "stem_c2_pad0_misaligned", .h = 6, .w = 7, .c_in = 2, .c_out = 8, .pad = 0, .bias = kChannel,
       .x_misalign_bytes = 2, .hostile = "c_in 2, no padding, x 2 bytes past a 16-byte boundary"},
      {.name = "c4_direct", .h = 10, .w = 12, .c_in = 4, .c_out = 32, .bias = kChannel, .act = kSilu,
       .hostile = "c_in 4: the direct kernel"},
      {.name = "c4_direct_gn", .h = 6, .w = 5, .c_in = 4, .c_out = 8, .act = kSilu, .gn_groups = 2,
       .hostile = "the direct kernel with the GroupNorm prologue"},
      {.name = "conv_out_c4", .h = 6, .w = 6, .c_in = 32, .c_out = 4, .residual = true, .bias = kChannel,
       .hostile = "c_out 4 (conv_out)"},
      {.name = "narrow_c40_5_gn_film_res_relu", .h = 10, .w = 70, .c_in = 40, .c_out = 5, .residual = true,
       .act_after_residual = true, .scale = kImage, .bias = kImage, .act = kRelu, .gn_groups = 8,
       .hostile = "c_out 5: a part-empty last chunk of 32 channels, rows past one 64-pixel tile, every epilogue part"},
      {.name = "narrow_pad_end_c3", .n = 1, .h = 9, .w = 11, .c_in = 16, .c_out = 3, .pad_end = 2, .bias = kChannel,
       .hostile = "c_out 3 with one more row and column of zeros after the input"},
      {.name = "narrow_k1_in_place_c8", .h = 5, .w = 7, .c_in = 24, .c_out = 8, .k = 1, .pad = 0, .residual = true,
       .bias = kChannel, .act = kSilu, .in_place = true, .hostile = "1x1 to 8 channels, y is the residual"},

      // ---- 1x1: the no-im2col path, and with stride 2 or a prologue (both need the gather)
      {.name = "k1", .h = 7, .w = 5, .c_in = 16, .c_out = 24, .k = 1, .pad = 0, .hostile = "1x1"},
      {.name = "k1_film_silu_res", .h = 7, .w = 5, .c_in = 16, .c_out = 24, .k = 1, .pad = 0, .residual = true,
       .scale = kImage, .bias = kImage, .act = kSilu, .hostile = "1x1, every epilogue part"},
      {.name = "k1_s2", .h = 7, .w = 5, .c_in = 16, .c_out = 8, .k = 1, .stride = 2, .pad = 0, .bias = kChannel,
       .hostile = "1x1 stride 2"},
      {.name = "k1_gn", .h = 6, .w = 6, .c_in = 32, .c_out = 16, .k = 1, .pad = 0, .bias = kChannel, .gn_groups = 8,
       .hostile = "1x1 with the GroupNorm prologue"},
      {.name = "k1_shortcut_320", .h = 6, .w = 6, .c_in = 320, .c_out = 64, .k = 1, .pad = 0, .residual = true,
       .scale = kChannel, .bias = kChannel, .hostile = "1x1 shortcut"},
      {.name = "k1_128_96", .n = 1, .h = 16, .w = 16, .c_in = 128, .c_out = 96, .k = 1, .pad = 0, .residual = true,
       .scale = kChannel, .bias = kChannel, .hostile = "1x1 on the wgmma kernel"},

      // ---- 3x3 stride 1 and 2, pad 0 and 1, odd sizes, every epilogue part
      {.name = "pad0_res", .h = 7, .w = 5, .c_in = 16, .c_out = 12, .pad = 0, .residual = true,
       .hostile = "no padding, c_out 12"},
      {.name = "pad0_c8", .n = 1, .h = 7, .w = 9, .c_in = 8, .c_out = 16, .pad = 0,
       .hostile = "no padding, c_in 8"},
      {.name = "s2_c10", .h = 9, .w = 7, .c_in = 8, .c_out = 10, .stride = 2, .scale = kChannel, .bias = kChannel,
       .act = kSilu, .hostile = "stride 2, c_out 10"},
      {.name = "s2_pad0_c12", .h = 8, .w = 6, .c_in = 12, .c_out = 12, .stride = 2, .pad = 0,
       .hostile = "stride 2 without padding, c_in 12"},
      {.name = "s2_k_tail", .h = 17, .w = 13, .c_in = 40, .c_out = 24, .stride = 2, .residual = true,
       .bias = kChannel, .act = kSilu, .hostile = "stride 2, K 360: a tail in the last k-tile"},
      {.name = "film_c20", .h = 7, .w = 5, .c_in = 16, .c_out = 20, .residual = true, .scale = kImage, .bias = kImage,
       .act = kSilu, .hostile = "FiLM rows per image, c_out 20"},
      {.name = "odd_film_res", .n = 1, .h = 9, .w = 7, .c_in = 64, .c_out = 48, .residual = true, .scale = kImage,
       .bias = kImage, .hostile = "odd h and w"},
      {.name = "k5", .n = 1, .h = 6, .w = 7, .c_in = 5, .c_out = 3, .k = 5, .pad = 2, .hostile = "5x5 kernel"},
      {.name = "cout_gt_pixels", .h = 4, .w = 4, .c_in = 128, .c_out = 40, .stride = 2, .residual = true,
       .scale = kImage, .bias = kImage, .act = kSilu, .gn_groups = 32,
       .hostile = "more output channels than pixels (the CPU splits the GEMM's columns)"},
      {.name = "gemm_24x20", .h = 24, .w = 20, .c_in = 128, .c_out = 16, .residual = true, .bias = kImage,
       .act = kSilu, .gn_groups = 32},
      {.name = "k9216_c4", .h = 23, .w = 25, .c_in = 1024, .c_out = 4, .residual = true, .scale = kImage,
       .bias = kImage, .hostile = "K 9216 at 2 x 575 pixels: the CPU's im2col chunks end inside images; c_out 4"},
      {.name = "tails_everywhere", .h = 11, .w = 9, .c_in = 48, .c_out = 168, .residual = true, .scale = kImage,
       .bias = kImage, .act = kSilu, .hostile = "M 198, c_out 168, K 432: tails in every tile config"},
      {.name = "tails_everywhere_gn6", .h = 11, .w = 9, .c_in = 48, .c_out = 168, .residual = true,
       .scale = kImage, .bias = kImage, .act = kSilu, .gn_groups = 6,
       .hostile = "tails in every tile config, GroupNorm of 8 channels"},
      {.name = "wgmma_c168", .h = 8, .w = 8, .c_in = 64, .c_out = 168, .residual = true, .scale = kImage,
       .bias = kImage, .act = kSilu, .hostile = "c_out 168 = 160 + 8: a ragged wgmma tile"},

      // ---- the GroupNorm+SiLU prologue: 1 and 2 channels per group, stride 2, three images
      {.name = "gn_1ch", .h = 7, .w = 5, .c_in = 32, .c_out = 16, .bias = kChannel, .gn_groups = 32,
       .hostile = "one channel per group"},
      {.name = "gn_2ch_all", .h = 8, .w = 8, .c_in = 32, .c_out = 16, .residual = true, .scale = kImage,
       .bias = kImage, .act = kSilu, .gn_groups = 16, .hostile = "two channels per group, every epilogue part"},
      {.name = "gn_s2", .h = 9, .w = 9, .c_in = 24, .c_out = 8, .stride = 2, .gn_groups = 8,
       .hostile = "GroupNorm prologue with stride 2"},
      {.name = "gn_c20", .h = 7, .w = 5, .c_in = 64, .c_out = 20, .residual = true, .scale = kChannel,
       .bias = kChannel, .act = kSilu, .gn_groups = 8, .hostile = "c_out 20: scalar stores"},
      {.name = "gn_n3", .n = 3, .h = 7, .w = 5, .c_in = 64, .c_out = 20, .residual = true, .scale = kChannel,
       .bias = kChannel, .act = kSilu, .gn_groups = 8, .hostile = "three images, c_out 20"},
      {.name = "gn8_128_64", .h = 8, .w = 8, .c_in = 128, .c_out = 64, .scale = kChannel, .bias = kChannel,
       .act = kSilu, .gn_groups = 8, .hostile = "GroupNorm prologue on the wgmma kernel"},

      // ---- the autoencoders' own: padding only after the input, ReLU before and after the residual
      {.name = "downsample_pad_end", .h = 8, .w = 6, .c_in = 16, .c_out = 16, .stride = 2, .pad = 0, .pad_end = 1,
       .bias = kChannel, .hostile = "Downsample2D: zeros after the input only (h_out 4, not 3)"},
      {.name = "downsample_pad_end_odd", .n = 1, .h = 7, .w = 9, .c_in = 32, .c_out = 24, .stride = 2, .pad = 0,
       .pad_end = 1, .residual = true, .bias = kChannel, .gn_groups = 8,
       .hostile = "Downsample2D at odd sizes, with the GroupNorm prologue"},
      {.name = "downsample_pad_end_c3", .n = 1, .h = 6, .w = 6, .c_in = 3, .c_out = 8, .stride = 2, .pad = 0,
       .pad_end = 1, .hostile = "Downsample2D, c_in 3: the direct kernel"},
      {.name = "k1_pad_end", .n = 1, .h = 5, .w = 4, .c_in = 16, .c_out = 8, .k = 1, .pad = 0, .pad_end = 1,
       .bias = kChannel, .hostile = "1x1 with a zero row and column after the input: h_out = h + 1"},
      {.name = "relu_then_residual", .h = 7, .w = 5, .c_in = 16, .c_out = 24, .residual = true, .scale = kChannel,
       .bias = kChannel, .act = kRelu, .hostile = "ReLU, then the residual"},
      {.name = "residual_then_relu", .h = 9, .w = 7, .c_in = 64, .c_out = 64, .residual = true,
       .act_after_residual = true, .bias = kChannel, .act = kRelu, .hostile = "TAESD's block: ReLU after the residual"},
      {.name = "residual_then_relu_scaled", .h = 7, .w = 5, .c_in = 16, .c_out = 20, .residual = true,
       .act_after_residual = true, .scale = kImage, .bias = kImage, .act = kRelu,
       .hostile = "ReLU after the residual, scale per image, c_out 20"},
      {.name = "residual_then_relu_c3", .n = 1, .h = 6, .w = 5, .c_in = 3, .c_out = 8, .residual = true,
       .act_after_residual = true, .bias = kChannel, .act = kRelu, .hostile = "ReLU after the residual, direct kernel"},
      {.name = "residual_then_silu_gn", .h = 8, .w = 8, .c_in = 64, .c_out = 64, .residual = true,
       .act_after_residual = true, .bias = kChannel, .act = kSilu, .gn_groups = 8,
       .hostile = "SiLU after the residual, with the GroupNorm prologue"},
      {.name = "in_place_residual_then_relu", .h = 8, .w = 8, .c_in = 64, .c_out = 64, .residual = true,
       .act_after_residual = true, .bias = kChannel, .act = kRelu, .in_place = true,
       .hostile = "y is the residual, ReLU after it (the residual enters the CPU's GEMM)"},

      // ---- y in place of the residual (the skip connection), and x off its alignment
      {.name = "in_place_64_96", .h = 16, .w = 16, .c_in = 64, .c_out = 96, .residual = true, .bias = kImage,
       .act = kSilu, .in_place = true, .hostile = "y is the residual"},
      {.name = "in_place_wgmma_c168", .h = 8, .w = 8, .c_in = 64, .c_out = 168, .residual = true, .scale = kImage,
       .bias = kImage, .act = kSilu, .in_place = true, .hostile = "y is the residual, ragged wgmma tile"},
      {.name = "in_place_linear", .h = 7, .w = 5, .c_in = 16, .c_out = 12, .residual = true, .bias = kImage,
       .in_place = true, .hostile = "y is the residual, no activation (the CPU's in-place case)"},
      {.name = "misaligned_x", .h = 6, .w = 6, .c_in = 32, .c_out = 32, .residual = true, .bias = kChannel,
       .act = kSilu, .x_misalign_bytes = 2, .hostile = "x only 2-byte aligned: the direct kernel"},
  };
}

size_t rows_of(ConvRows r, int n) { return r == ConvRows::None ? 0 : r == ConvRows::Image ? size_t(n) : 1; }

}  // namespace

const std::vector<Conv2dCase>& conv2d_cases() {
  static const std::vector<Conv2dCase> cases = make_cases();
  return cases;
}

Conv2dSizes conv2d_sizes(const Conv2dCase& c) {
  Conv2dSizes s{};
  s.x = size_t(c.n) * c.h * c.w * c.c_in;
  s.weight = size_t(c.c_out) * c.k * c.k * c.c_in;
  s.y = size_t(c.n) * c.h_out() * c.w_out() * c.c_out;
  s.scale = rows_of(c.scale, c.n) * c.c_out;
  s.bias = rows_of(c.bias, c.n) * c.c_out;
  if (c.gn_groups) {
    s.gn_stats = size_t(c.n) * c.gn_groups * 2;
    s.gn_gamma = s.gn_beta = size_t(c.c_in);
  }
  return s;
}

Conv2dParams conv2d_params(const Conv2dCase& c, const Conv2dOperands& o) {
  Conv2dParams p;
  p.x = o.x;
  p.weight = o.weight;
  p.y = o.y;
  p.residual = !c.residual ? nullptr : c.in_place ? o.y : o.residual;
  p.scale = c.scale != ConvRows::None ? o.scale : nullptr;
  p.bias = c.bias != ConvRows::None ? o.bias : nullptr;
  p.scale_batch_stride = c.scale == ConvRows::Image ? c.c_out : 0;
  p.bias_batch_stride = c.bias == ConvRows::Image ? c.c_out : 0;
  if (c.gn_groups) {
    p.gn_stats = o.gn_stats;
    p.gn_gamma = o.gn_gamma;
    p.gn_beta = o.gn_beta;
    p.gn_groups = c.gn_groups;
  }
  p.n = c.n, p.h = c.h, p.w = c.w, p.c_in = c.c_in, p.c_out = c.c_out;
  p.kh = p.kw = c.k, p.stride = c.stride, p.pad = c.pad;
  p.h_out = c.h_out(), p.w_out = c.w_out();
  p.act = c.act;
  p.act_after_residual = c.act_after_residual;
  return p;
}

}  // namespace rtvd
