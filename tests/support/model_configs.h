// Model configs in tests: comparing U-Net architectures field by field, counting a parameter list, SDXL's.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/safetensors.h"

namespace rtvd::test {

// Every field but name and dtype, each its own expectation.
void expect_same_architecture(const ModelConfig& a, const ModelConfig& b);

// Elements of every tensor of the list.
int64_t parameter_count(const std::vector<TensorSpec>& specs);

// SDXL base as published (stabilityai/stable-diffusion-xl-base-1.0's unet/config.json, the keys rtvd reads).
inline constexpr const char* kSdxlBaseUNetConfig = R"({
  "_class_name": "UNet2DConditionModel", "sample_size": 128, "in_channels": 4, "out_channels": 4,
  "block_out_channels": [320, 640, 1280], "layers_per_block": 2,
  "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
  "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
  "attention_head_dim": [5, 10, 20], "cross_attention_dim": 2048, "transformer_layers_per_block": [1, 2, 10],
  "use_linear_projection": true, "addition_embed_type": "text_time", "addition_time_embed_dim": 256,
  "projection_class_embeddings_input_dim": 2816, "norm_num_groups": 32})";

}  // namespace rtvd::test
