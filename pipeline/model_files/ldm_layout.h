// The original (LDM) layout of a Stable Diffusion checkpoint, component by component: each tensor under a
// component's prefix renamed to diffusers' (transformers') name, as a view into the file, and the architecture
// read off the renamed tensors' shapes as the config JSON that diffusers (transformers) would write. The
// inverse of diffusers' convert_ldm_unet_checkpoint, convert_ldm_vae_checkpoint, convert_ldm_clip_checkpoint and
// convert_open_clip_checkpoint (loaders/single_file_utils.py). Used by single_file.cpp, controlnet_single_file.cpp
// and lora.cpp.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

// The tensors of one component: those whose names start with prefix, in file order.
struct LdmComponent {
  std::string prefix;  // "model.diffusion_model.", "first_stage_model.", "cond_stage_model.transformer.", ...
  std::vector<const TensorView*> tensors;
  std::shared_ptr<const SafeTensorsFile> file;
  const std::string& label() const { return file->label(); }
};

// ---- U-Net (ldm_unet.cpp)

// model.diffusion_model.* -> diffusers' UNet2DConditionModel names (SDXL's label_emb.0.0/0.2: add_embedding). Levels and blocks are taken in the order of
// their indices rather than computed from them: the original code numbers input_blocks and output_blocks
// through the levels (1 + level * (layers_per_block + 1) + j), while diffusers' own converter to this layout
// (scripts/convert_diffusers_to_original_stable_diffusion.py) numbers them as SD's 2 ResNets a level whatever
// the U-Net has, leaving gaps; read in order, both name the same modules. Error naming the file and tensor on
// a name of neither.
TensorSet map_ldm_unet(const LdmComponent& c);

// The original names of a diffusers U-Net's tensors (every name in diffusers_names, with its layers per block
// counted from them), numbered as the original code numbers them: what a single file or a kohya LoRA in the
// original layout calls each. Names that are not a U-Net's are left out.
std::map<std::string, std::string> ldm_unet_names(const std::vector<std::string>& diffusers_names);

// The family of the renamed U-Net, by the context width of the text encoder(s) it was trained with (the mid
// block's cross-attention): 768 "SD 1.x", 1024 "SD 2.x", 2048 "SDXL"; another is an Error naming the tensor
// and ending in what to give instead, config_to_give.
std::string unet_architecture(const TensorSet& unet, std::string_view config_to_give =
                                                         "a diffusers folder whose unet/config.json describes this U-Net");

// diffusers' unet/config.json for the renamed tensors. Shapes give everything but the heads, which the
// family gives: SD 1.x has 8 at every level, SD 2.x and SDXL heads of 64. SDXL's transformer depth per level
// is counted; its added embedding (add_embedding) takes the pooled projection of pooled_width (text_encoder_2's
// projection_dim) and six time ids, each embedded at (input width - pooled_width) / 6: an Error naming the
// tensor where that does not divide.
std::string infer_unet_config(const TensorSet& unet, int sample_size, int64_t pooled_width = 0);
// The keys of that config which the down path and mid block settle (in_channels, block_out_channels,
// layers_per_block, down_block_types, norm_num_groups, cross_attention_dim, attention_head_dim,
// use_linear_projection, transformer_layers_per_block, SDXL's addition_*): what a ControlNet, a copy of them,
// shares with its U-Net.
nlohmann::json infer_unet_down_config(const TensorSet& unet, int64_t pooled_width);

// ---- VAE (ldm_vae.cpp)

// first_stage_model.* -> diffusers' AutoencoderKL names; the mid-block attention's 1x1 convs (C, C, 1, 1) are
// viewed as the (C, C) linear weights diffusers has. Decoder levels in descending index order (the original
// numbers them by resolution, diffusers' up_blocks in the order they run).
TensorSet map_ldm_vae(const LdmComponent& c);

// diffusers' vae/config.json for the renamed tensors (GroupNorm of 32 groups, as the original code always has;
// SD's scaling factor 0.18215, SDXL's 0.13025 with force_upcast, as diffusers' configs for each).
std::string infer_vae_config(const TensorSet& vae, int sample_size, bool sdxl);

// ---- text encoder (ldm_text_encoder.cpp)

// cond_stage_model.transformer.[text_model.]* (OpenAI CLIP, SD 1.x) -> transformers' CLIPTextModel names
// without "text_model."; the position_ids buffer is dropped.
TensorSet map_ldm_clip(const LdmComponent& c);

// cond_stage_model.model.* (OpenCLIP, SD 2.x) -> the same names: in_proj split into q/k/v rows, the first
// `layers` resblocks kept. SD 2.x takes the hidden state before OpenCLIP's last block, so a file holds one block
// more than the text encoder has, which is dropped with text_projection and logit_scale. layers < 0: the file's
// blocks less one; else the file must hold layers or layers + 1 blocks.
TensorSet map_open_clip(const LdmComponent& c, int layers);

// conditioner.embedders.1.model.* (OpenCLIP bigG, SDXL's second text encoder) -> transformers'
// CLIPTextModelWithProjection names without "text_model.": every block kept (SDXL takes the penultimate hidden
// state of the whole model), in_proj split as above, and text_projection, stored (width, projection) for
// x @ P, transposed into memory as text_projection.weight (projection, width), the one tensor not a view into
// the file. layers < 0: the file's blocks; else the file must hold exactly layers.
TensorSet map_open_clip_with_projection(const LdmComponent& c, int layers);

// transformers' text_encoder/config.json for the renamed tensors; heads of 64 (OpenAI CLIP-L, OpenCLIP-H and
// -bigG), hidden_act "quick_gelu" (OpenAI) or "gelu" (OpenCLIP); CLIPTextModelWithProjection with its
// projection_dim where the tensors have text_projection.weight.
std::string infer_clip_config(const TensorSet& text_encoder, bool open_clip);

}  // namespace rtvd
