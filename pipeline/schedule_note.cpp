#include "pipeline/schedule_note.h"

#include "base/error.h"
#include "pipeline/samplers/sampler_plan.h"

namespace rtvd {

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

}  // namespace rtvd
