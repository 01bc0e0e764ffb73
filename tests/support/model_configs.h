// Model configs in tests: comparing U-Net architectures field by field, counting a parameter list.
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

}  // namespace rtvd::test
