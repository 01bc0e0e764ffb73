// The scaled-down SDXL U-Net of tests/data/tiny_sdxl (tools/reference/export_tiny_sdxl.py: diffusers'
// save_pretrained) and diffusers' fp32 outputs for it, case by case.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pipeline/graph/weights.h"
#include "pipeline/model_files/model_config.h"

namespace rtvd::test {

// A bare diffusers unet/ folder: its config.json mapped (fp16 weights) and its weights.
struct DiffusersUNet {
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
};
DiffusersUNet load_diffusers_unet(const std::string& dir);

// One forward's inputs and diffusers' output, NHWC float32; t is the flow time (timestep / 1000) of every image.
struct SdxlCase {
  std::string name;
  int batch = 0, height = 0, width = 0;
  float t = 0;
  std::vector<float> x, context, text_embeds, time_ids, v;
};
std::vector<SdxlCase> read_sdxl_reference(const std::string& path);

}  // namespace rtvd::test
