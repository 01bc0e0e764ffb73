// The architecture of an SD autoencoder, from diffusers' vae/config.json: AutoencoderKL (the SD VAE) or
// AutoencoderTiny (TAESD), by its _class_name. Every key is known and range-checked; keys that select a variant
// rtvd does not build must hold diffusers' default. Both map RGB images in [-1, 1] to latents and back; what the
// sampler sees is LatentSpace's scaled latent.
#pragma once
#include <string>
#include <variant>
#include <vector>

namespace rtvd {

constexpr int kMaxTinyBlocks = 16;  // AutoencoderTinyBlocks at one level of TAESD (published: 1 or 3)

// The latent space of an autoencoder as the sampler sees it: the autoencoder's latent z becomes
// (z - shift_factor) * scaling_factor, as diffusers' pipelines hand it over.
struct LatentSpace {
  int channels = 4;                 // latent_channels
  int pixels_per_latent = 8;        // image pixels per latent along each side: 2^(levels - 1)
  float scaling_factor = 0.18215f;  // SD 1.x/2.x's VAE; TAESD's config holds 1
  float shift_factor = 0.0f;        // null in the config: 0
};

// diffusers' AutoencoderKL: an Encoder of DownEncoderBlock2Ds and a UNetMidBlock2D, the Gaussian's quant_conv,
// and a Decoder of the mid block and UpDecoderBlock2Ds after the post_quant_conv. SD's: 128/256/512/512, 2
// ResNets per level (3 on the way up), 32 groups.
struct AutoencoderKLConfig {
  LatentSpace latent;
  std::vector<int> block_out_channels = {64};
  int layers_per_block = 1;      // ResNets per encoder level; the decoder's levels have one more
  int norm_num_groups = 32;
  bool mid_block_attention = true;  // mid_block_add_attention
  bool use_quant_conv = true;
  bool use_post_quant_conv = true;
  // diffusers runs the VAE in fp32 when set, since SDXL's fp16 decoder overflows. rtvd accumulates in fp32
  // but stores fp16 activations on the GPU: for an SDXL model it notes the overflow (Model::vae_overflows_fp16).
  bool force_upcast = true;
  int levels() const { return int(block_out_channels.size()); }
};

// diffusers' AutoencoderTiny (TAESD): EncoderTiny and DecoderTiny, plain 3x3 convs with ReLU and
// AutoencoderTinyBlocks; the same width at every level (their convs keep it).
struct AutoencoderTinyConfig {
  LatentSpace latent{4, 8, 1.0f, 0.0f};
  std::vector<int> encoder_block_out_channels = {64, 64, 64, 64};
  std::vector<int> num_encoder_blocks = {1, 3, 3, 3};
  std::vector<int> decoder_block_out_channels = {64, 64, 64, 64};
  std::vector<int> num_decoder_blocks = {3, 3, 3, 1};
  // TAESD's own 8-bit storage of latents (scale_latents: z / (2 magnitude) + shift, clamped to [0, 1]),
  // which diffusers' SD pipelines do not use: kept for a caller that reads or writes such latents.
  float latent_magnitude = 3.0f;
  float latent_shift = 0.5f;
  bool force_upcast = false;
  int levels() const { return int(encoder_block_out_channels.size()); }
};

struct AutoencoderConfig {
  std::variant<AutoencoderKLConfig, AutoencoderTinyConfig> model;

  bool tiny() const { return std::holds_alternative<AutoencoderTinyConfig>(model); }
  const LatentSpace& latent() const;
  bool force_upcast() const;
};

// label names the source in errors.
AutoencoderConfig parse_autoencoder_config(const std::string& json_text, const std::string& label);
AutoencoderConfig load_autoencoder_config(const std::string& path);

}  // namespace rtvd
