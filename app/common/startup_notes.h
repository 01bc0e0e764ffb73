// The notes rtvd render and rtvd gui print on stderr once the engine is made and the frame's settings are
// chosen: why the device is not the one asked for, a size the model was not trained at, a few-step schedule
// that starts far from pure noise, an autoencoder that overflows on the GPU.
#pragma once
#include <optional>
#include <string>

#include "pipeline/engine.h"
#include "pipeline/samplers/scheduler_config.h"

namespace rtvd {

// A model draws well at the size it was trained at (Model::native_size: config.json's sample_size, times the
// autoencoder's pixels per latent for SD models) and gives formless images at others: the default model,
// trained at 64x64, turns to mush at 128x128. Nothing stops a user asking for another size, so render and
// the GUI say so once, where the size is chosen.
// "" when width x height is the model's training size; else one line for stderr or the GUI, e.g.
// "note: the model was trained at 64x64; at 128x96 it gives poor images (leave out --size for 64x64)".
std::string size_note(int native_size, int width, int height);

// A checkpoint without a scheduler config (a single file) runs SD's default schedule, whose "leading" spacing
// starts a few steps far from pure noise: one step runs at t = 1 of 999, almost a no-op, where a distilled
// few-step model such as SD-Turbo (whose own config says "trailing") starts at t = 999. rtvd cannot tell SD-Turbo
// from SD 2.1 by its tensors, so render and the GUI say so, where the steps are chosen.
// "" unless cfg is assumed (SchedulerConfig::assumed), spaced "leading", and the sampler (--sampler's, else the
// config's own; not LCM, which has its own spacing) runs at most 4 steps; then one line for stderr or the GUI
// naming the first timestep and the flag. No config (a pixel-space model): "".
std::string schedule_note(const std::optional<SchedulerConfig>& cfg, std::optional<SamplerKind> sampler, int steps);

// SDXL's own VAE (force_upcast in its config) overflows fp16, which the GPU's activations are: its frames come
// out NaN, so render and the GUI say so, with the fix, before the first frame.
// "" unless fp16 and model.vae_overflows_fp16(); then one line for stderr or the GUI: "note: " and
// fp16_vae_advice().
std::string vae_precision_note(const Model& model, bool fp16);

// The engine's device note, size_note, schedule_note for these settings and vae_precision_note, each that is not
// empty on a line of its own.
void print_startup_notes(const Engine& engine, const FrameSettings& settings);

}  // namespace rtvd
