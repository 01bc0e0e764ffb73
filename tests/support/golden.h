// Golden cases of the PyTorch reference (tools/reference/export_golden.py, export_sd_parity.py): the
// inputs of one U-Net forward and the reference velocity, NHWC float32, keys x, t, class_labels,
// context, v with a suffix per case ("", "2").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/models/model.h"
#include "pipeline/model_files/safetensors.h"

namespace rtvd::test {

struct GoldenCase {
  int batch = 0, height = 0, width = 0;
  float t = 0;  // the flow time of every image
  std::vector<float> x, context, v;
  std::vector<int32_t> class_ids;
};

GoldenCase read_golden(const SafeTensorsFile& file, const std::string& suffix = "");
std::vector<float> floats(const TensorView& t);  // an F32 tensor

// The model of a golden made with generated weights: config.json in dir, the weights from the seed in
// the metadata of dir/golden.safetensors (tools/reference/random_weights.py).
Model generated_golden_model(const std::string& dir);

}  // namespace rtvd::test
