// LoRA files (--lora FILE[:SCALE]): low-rank updates W += scale * alpha / rank * up down of the U-Net's and the
// text encoders' weights, attached to their TensorSets and merged when the weights are written (graph/weights.h).
// The formats Stable Diffusion and SDXL LoRAs are published in:
//   - diffusers / PEFT: "unet.<module>.", "text_encoder.<module>." or SDXL's "text_encoder_2.<module>." (or no
//     prefix: the U-Net, as the first diffusers LoRAs), then lora_A/lora_B.weight, lora.down/lora.up.weight,
//     lora_linear_layer.down/up.weight, or the older attention processor's
//     to_q_lora/to_k_lora/to_v_lora/to_out_lora.down/up.weight; an optional "<module>.alpha"; diffusers'
//     lora_adapter_metadata (lora_alpha, alpha_pattern, use_rslora) when saved;
//   - kohya: "lora_unet_<module>", "lora_te_<module>" (SDXL: "lora_te1_", "lora_te2_") with '.' written '_',
//     then lora_down/lora_up.weight and alpha. Module names are matched against the model's own, written the
//     same way (and against the U-Net's original-layout names, input_blocks_4_1_..., which kohya uses for
//     some models and for SDXL).
// Modules are diffusers' (U-Net) and transformers' (text encoder, with or without "text_model."). Without
// alpha, alpha = rank. Convs take conv factors: down (rank, in, kh, kw), up (out, rank, 1, 1).
#pragma once
#include <string>

#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

struct LoraSpec {
  std::string path;
  float scale = 1.0f;
};

// "FILE" or "FILE:SCALE" (SCALE a finite number; a value that is an existing file is taken whole). Error naming
// --lora and the value.
LoraSpec parse_lora_spec(const std::string& value);

// Attaches every update of the file to the U-Net's tensors and the text encoders' (nullptr: the model has
// none; text_encoder_2 is SDXL's second). Nothing is attached unless the whole file is understood: an unknown
// key, a module the model does not have, an unpaired factor, factors whose shapes do not make an update of the
// weight, a factor of rank 0, a text-encoder update for a model without that encoder, or a pickle are each an
// Error naming the file and the key; a file of no tensors, which would change nothing, an Error naming the
// file.
void apply_lora(const LoraSpec& spec, TensorSet& unet, TensorSet* text_encoder, TensorSet* text_encoder_2 = nullptr);

}  // namespace rtvd
