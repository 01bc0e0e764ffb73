// ControlNet checkpoints as most are shared: one .safetensors in the original (ControlNet's cldm) layout, with
// or without the control_model. prefix: input_hint_block.* (the conditioning embedding: convs at 0, 2, ..., 14,
// SiLU between them), time_embed.*, label_emb.* (SDXL), input_blocks.* and middle_block.* (a copy of the U-Net's
// encoder, in ldm_unet.cpp's layout), zero_convs.N.0.* and middle_block_out.0.* (the zero convolutions). The
// tensors come out under diffusers' ControlNetModel names, views into the mapped file, with the config.json
// diffusers' ControlNetModel would have, so that a folder's reader takes either. The inverse of diffusers'
// convert_controlnet_checkpoint (loaders/single_file_utils.py), which leaves SDXL's label_emb out; rtvd maps it
// as the U-Net's, to add_embedding.
#pragma once
#include <string>

#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/single_file.h"

namespace rtvd {

struct ControlNetSingleFile {
  SingleFileComponent controlnet;  // diffusers' ControlNetModel names and config.json
  std::string architecture;        // "SD 1.x", "SD 2.x", "SDXL", or "config of FOLDER" when a config was given
};

// Reads the file's header and maps it (no tensor data is read). With the control_model. prefix only the tensors
// under it are the ControlNet's (ControlNet's own training checkpoints hold the Stable Diffusion model beside
// it, as diffusers reads them); without it every tensor must be a ControlNet's. The architecture is inferred
// from the shapes as a single-file checkpoint's U-Net (ldm_layout.h: SD 1.x, SD 2.x or SDXL by the context
// width; SDXL's pooled text embedding 1280 wide), the conditioning embedding's channels from the hint block's.
// config_folder: a diffusers ControlNet folder whose config.json describes the file instead (as diffusers'
// ControlNetModel.from_single_file(config=...)). Errors name the file and the tensor: a pickle, a Stable
// Diffusion checkpoint rather than a ControlNet, a hint block of other layers, a missing zero conv, shapes that
// do not chain, a shape of no known architecture.
ControlNetSingleFile open_controlnet_single_file(const std::string& path, const std::string& config_folder = "");
// The same for a file already open (one in memory: SafeTensorsFile::from_memory or build).
ControlNetSingleFile read_controlnet_single_file(SafeTensorsFile file, const std::string& config_folder = "");

// A tensor of file that only a ControlNet has (its hint block or zero convs, in the original layout with or
// without control_model., or under diffusers' names), or nullptr: for a model's reader to say that a file is a
// ControlNet.
const TensorView* controlnet_tensor(const SafeTensorsFile& file);

}  // namespace rtvd
