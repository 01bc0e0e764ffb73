#include "frame_plan.h"

#include "kernels/common/error.h"
#include "pipeline/models/unet.h"

namespace rtvd {

std::vector<float> flow_schedule(int steps, float start) {
  std::vector<float> t(steps + 1);
  for (int i = 0; i <= steps; ++i) t[i] = start * float(steps - i) / float(steps);
  return t;
}

FramePlan build_frame_plan(const ModelConfig& cfg, WeightStore& weights, const FrameSettings& s, bool img2img,
                           int width, int height, int act_bytes) {
  FramePlan plan;
  plan.batch = s.guidance == 1.0f ? 1 : 2;
  plan.width = width;
  plan.height = height;
  plan.start_t = img2img ? s.strength : 1.0f;
  plan.times = flow_schedule(s.steps, plan.start_t);
  Graph& g = plan.graph;
  const int C = cfg.in_channels, B = plan.batch;
  const int64_t count = int64_t(width) * height * C;

  plan.sample = g.add_tensor("sample", Elem::F32, {1, height, width, C}, true);
  plan.prev = g.add_tensor("previous_frame", Elem::F32, {1, height, width, C}, true);
  plan.rgba = g.add_tensor("rgba", Elem::U8, {height, width, 4}, true);
  if (cfg.num_class_embeds > 0) plan.class_ids = g.add_tensor("class_ids", Elem::I32, {B}, true);
  if (cfg.cross_attention_dim > 0)
    plan.context = g.add_tensor("context", Elem::Act, {B, cfg.context_length, cfg.cross_attention_dim}, true);

  UNetBuilder unet(cfg, weights, g, B, act_bytes);
  const CrossContext cross = unet.cross_context(plan.context);
  std::vector<StepConditioning> cond;
  for (int i = 0; i < s.steps; ++i) cond.push_back(unet.conditioning(plan.times[i], plan.class_ids, cat("step", i)));

  const Ref model_in = g.add_tensor("model_input", Elem::Act, {B, height, width, C});
  CastOp cast;
  cast.p.count = count;
  cast.p.copies = B;
  cast.x = plan.sample;
  cast.y = model_in;
  g.frame.push_back(Op{"sampler.input", std::move(cast), 0, double(count) * (4 + B * act_bytes)});

  for (int i = 0; i < s.steps; ++i) {
    const Ref v = unet.forward(model_in, height, width, cond[i], cross, cat("step", i));
    const float dt = plan.times[i] - plan.times[i + 1];
    if (i + 1 < s.steps) {
      GuidanceStepOp step;
      step.p.count = count;
      step.p.batch = B;
      step.p.guidance = s.guidance;
      step.p.dt = dt;
      step.v = v;
      step.x = plan.sample;
      step.model_in = model_in;
      g.frame.push_back(Op{cat("sampler.step", i), std::move(step), 0, double(count) * (2 * B * act_bytes + 8)});
      continue;
    }
    // The last step, the blend with the previous frame and the RGBA8 conversion in one pass.
    DenoiseBlendOp last;
    last.p.h = height;
    last.p.w = width;
    last.p.c = C;
    last.p.batch = B;
    last.p.guidance = s.guidance;
    last.p.dt = dt;
    last.p.blend = s.blend;
    last.v = v;
    last.x = plan.sample;
    last.prev = plan.prev;
    last.rgba = plan.rgba;
    plan.blend_op = g.frame.size();
    g.frame.push_back(Op{cat("sampler.step", i, "+blend+rgba8"), std::move(last), 0,
                         double(count) * (B * act_bytes + 16) + double(width) * height * 4});
  }
  return plan;
}

}  // namespace rtvd
