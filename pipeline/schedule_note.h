// A checkpoint without a scheduler config (a single file) runs SD's default schedule, whose "leading" spacing
// starts a few steps far from pure noise: one step runs at t = 1 of 999, almost a no-op, where a distilled
// few-step model such as SD-Turbo (whose own config says "trailing") starts at t = 999. rtvd cannot tell SD-Turbo
// from SD 2.1 by its tensors, so render and the GUI say so, where the steps are chosen.
#pragma once
#include <optional>
#include <string>

#include "pipeline/samplers/scheduler_config.h"

namespace rtvd {

// "" unless cfg is assumed (SchedulerConfig::assumed), spaced "leading", and the sampler (--sampler's, else the
// config's own; not LCM, which has its own spacing) runs at most 4 steps; then one line for stderr or the GUI
// naming the first timestep and the flag. No config (a pixel-space model): "".
std::string schedule_note(const std::optional<SchedulerConfig>& cfg, std::optional<SamplerKind> sampler, int steps);

}  // namespace rtvd
