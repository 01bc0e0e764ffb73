// From a command's generation flags to the engine and its frame settings: one place for rtvd render and
// rtvd gui, so both run the same frames for the same flags.
#pragma once
#include "cli.h"
#include "pipeline/engine.h"

namespace rtvd {

EngineOptions engine_options(const cli::GenerationOptions& o);
// The flags' frame settings for this engine's model; --class is resolved by name or id (Error if unknown,
// or given for a model without classes).
FrameSettings frame_settings(const cli::GenerationOptions& o, const Engine& engine);

}  // namespace rtvd
