#include "frame_plan.h"

#include <initializer_list>

#include "base/checked_math.h"
#include "base/error.h"
#include "pipeline/graph/memory_budget.h"
#include "pipeline/models/unet.h"

namespace rtvd {

int frame_batch(const FrameSettings& s, bool latent) { return (latent ? s.guidance > 1.0f : s.guidance != 1.0f) ? 2 : 1; }

int64_t FrameMemory::total() const { return checked_add(weights, activations, "frame memory"); }

std::string FrameMemory::describe() const {
  return cat("weights ", byte_size(weights), ", activations ", byte_size(activations));
}

FrameMemory frame_memory(const ModelConfig& cfg, int width, int height, int batch, int steps, int act_bytes) {
  const std::string what = cat(cfg.name, " at ", width, "x", height);
  const auto product = [&](std::initializer_list<int64_t> factors) {
    int64_t n = 1;
    for (int64_t f : factors) n = checked_mul(n, f, what);
    return n;
  };
  FrameMemory m;
  // Vectors (biases, norm scales) are left out: folded BatchNorm keeps two of its four.
  for (const TensorSpec& t : unet_parameters(cfg))
    if (t.shape.size() >= 2) m.weights = checked_add(m.weights, checked_numel(t.shape, what, act_bytes), what);

  int64_t& a = m.activations;
  const auto add = [&](std::initializer_list<int64_t> factors) { a = checked_add(a, product(factors), what); };
  const int C = cfg.in_channels;
  add({2, height, width, C, 4});             // sample and previous_frame, fp32
  add({height, width, 4});                   // rgba
  add({batch, height, width, C, act_bytes});  // model_input, read by every step
  if (cfg.cross_attention_dim > 0) add({batch, cfg.context_length, cfg.cross_attention_dim, act_bytes});
  int64_t film = 0;  // FiLM floats per image and step: every ResNet's bias, and its scale with BatchNorm
  for (const auto& resnet : unet_resnets(cfg)) film += int64_t(resnet.second) * (cfg.norm == NormKind::Batch ? 2 : 1);
  add({steps, batch, film, 4});
  // The skips (diffusers' down_block_res_samples) are all alive when the up path starts: conv_in's output,
  // every down ResNet's (or transformer's) output and every downsampler's.
  const auto& ch = cfg.block_out_channels;
  int64_t h = height, w = width;
  add({batch, h, w, ch[0], act_bytes});
  for (int i = 0; i < cfg.levels(); ++i) {
    add({cfg.layers_per_block, batch, h, w, ch[i], act_bytes});
    if (i + 1 == cfg.levels()) break;
    h = (h + 1) / 2, w = (w + 1) / 2;  // a 3x3 stride-2 conv with padding 1
    add({batch, h, w, ch[i], act_bytes});
  }
  return m;
}

// Rectified-flow times from start down to 0, shifted towards high noise (t = s u / (1 + (s - 1) u) for
// uniform u, as SD3 does): a frame's shapes are decided at high noise, and a uniform grid spends one of 4
// steps there. At 4 steps on the default model, against a 64-step reference over 24 seeds, s = 4 cut the
// mean error from 17.1 to 8.9 (of 255) and the seeds that turn to mush from 8 to 2; s = 6 paled the colours.
std::vector<float> flow_schedule(int steps, float start) {
  constexpr double kShift = 4.0;
  std::vector<float> t(steps + 1);
  for (int i = 0; i <= steps; ++i) {
    const double u = double(steps - i) / steps;
    t[i] = float(start * kShift * u / (1 + (kShift - 1) * u));
  }
  return t;
}

void add_frame_output(FramePlan& plan) {
  const int64_t pixel_bytes = int64_t(plan.width) * plan.height * 4;
  plan.rgba = plan.graph.add_tensor("rgba", Elem::U8, {pixel_bytes + int64_t(sizeof(int32_t))}, true);
  plan.nonfinite = plan.rgba.at(pixel_bytes);  // 4-byte aligned: the arena aligns each tensor to 256 bytes
}

FramePlan build_frame_plan(const ModelConfig& cfg, WeightStore& weights, const FrameSettings& s, bool img2img,
                           int width, int height, int act_bytes) {
  FramePlan plan;
  plan.batch = frame_batch(s, false);
  plan.width = width;
  plan.height = height;
  plan.start_t = img2img ? s.strength : 1.0f;
  plan.times = flow_schedule(s.steps, plan.start_t);
  Graph& g = plan.graph;
  const int C = cfg.in_channels, B = plan.batch;
  const int64_t count = int64_t(width) * height * C;

  plan.sample = g.add_tensor("sample", Elem::F32, {1, height, width, C}, true);
  plan.prev = g.add_tensor("previous_frame", Elem::F32, {1, height, width, C}, true);
  add_frame_output(plan);
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
      step.p.copies = B;
      step.p.guidance = s.guidance;
      step.p.out_coef = -dt;  // rectified flow's Euler step: x - dt v
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
    last.p.out_coef = -dt;
    last.p.blend = s.blend;
    last.v = v;
    last.x = plan.sample;
    last.prev = plan.prev;
    last.rgba = plan.rgba;
    last.nonfinite = plan.nonfinite;
    plan.blend_op = g.frame.size();
    g.frame.push_back(Op{cat("sampler.step", i, "+blend+rgba8"), std::move(last), 0,
                         double(count) * (B * act_bytes + 16) + double(width) * height * 4});
  }
  return plan;
}

}  // namespace rtvd
