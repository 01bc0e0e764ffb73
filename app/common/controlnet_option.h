// One --controlnet of the command line (app/controlnet_flags.h), for every command that takes the flags.
#pragma once
#include <optional>

#include "pipeline/frame_plan.h"
#include "pipeline/io/source.h"

namespace rtvd::cli {

// --controlnet PATH[:SCALE] and the flags after it: the net's settings and, for --control FILE, the source of its
// control images.
struct ControlNetOption {
  ControlNetSettings settings;
  std::optional<SourceSpec> control;  // ControlPreprocessor::Image's images
};

}  // namespace rtvd::cli
