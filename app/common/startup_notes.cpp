#include "app/common/startup_notes.h"

#include <cstdio>

#include "base/error.h"
#include "pipeline/samplers/sampler_plan.h"

namespace rtvd {

std::string size_note(int n, int width, int height) {
  if (width == n && height == n) return "";
  return cat("note: the model was trained at ", n, "x", n, "; at ", width, "x", height,
             " it gives poor images (leave out --size for ", n, "x", n, ")");
}

std::string schedule_note(const std::optional<SchedulerConfig>& config, std::optional<SamplerKind> asked, int steps) {
  constexpr int kFewSteps = 4;
  if (!config || !config->assumed || steps > kFewSteps) return "";
  const SchedulerConfig& cfg = *config;
  const SamplerKind sampler = cfg.sampler_for(asked);
  if (sampler == SamplerKind::Lcm) return "";
  if (cfg.timestep_spacing.value_or(TimestepSpacing::Leading) != TimestepSpacing::Leading) return "";
  const SamplerPlan plan = make_sampler_plan(cfg, sampler, steps, 1.0f);
  return cat("note: the checkpoint brings no scheduler config, and SD's default spaces ", steps, " step",
             steps == 1 ? "" : "s", " from t = ", plan.steps.front().timestep, " of ", cfg.num_train_timesteps - 1,
             " (leading): a distilled few-step model (SD-Turbo) wants --timestep-spacing trailing");
}

std::string vae_precision_note(const Model& model, bool fp16) {
  if (!fp16 || !model.vae_overflows_fp16()) return "";
  return "note: " + fp16_vae_advice();
}

void print_startup_notes(const Engine& engine, const FrameSettings& settings) {
  if (!engine.device_note().empty()) std::fprintf(stderr, "note: %s\n", engine.device_note().c_str());
  for (const std::string& note : {size_note(engine.model().native_size(), engine.width(), engine.height()),
                                  schedule_note(engine.model().scheduler, settings.sampler, settings.steps),
                                  vae_precision_note(engine.model(), engine.on_gpu())})
    if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
}

}  // namespace rtvd
