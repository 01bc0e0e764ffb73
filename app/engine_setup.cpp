#include "engine_setup.h"

#include "pipeline/error.h"

namespace rtvd {

EngineOptions engine_options(const cli::GenerationOptions& o) {
  EngineOptions eo;
  eo.model_dir = o.model_dir;
  eo.device = o.device;
  eo.threads = o.threads;
  eo.kernels = o.kernels;
  if (o.size) eo.width = o.size->width, eo.height = o.size->height;
  return eo;
}

FrameSettings frame_settings(const cli::GenerationOptions& o, const Engine& engine) {
  FrameSettings s;
  s.seed = o.seed;
  s.steps = o.steps;
  s.guidance = float(o.guidance);
  s.strength = float(o.strength);
  s.blend = float(o.blend);
  if (engine.config().num_class_embeds > 0) s.class_id = engine.class_id(o.class_name);
  else if (!o.class_name.empty()) fail("--class ", o.class_name, ": this model has no classes");
  return s;
}

}  // namespace rtvd
