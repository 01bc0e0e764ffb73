// The default model (assets/default), linked into the binary so rtvd renders with no files beside it.
#pragma once
#include <span>
#include <string_view>

namespace rtvd {

struct EmbeddedModel {
  std::string_view config;
  std::span<const unsigned char> weights;
};

EmbeddedModel embedded_model();

}  // namespace rtvd
