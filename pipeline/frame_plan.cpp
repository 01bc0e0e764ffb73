#include "pipeline/frame_plan.h"

#include <memory>

#include "base/error.h"
#include "pipeline/cached_frame.h"
#include "pipeline/models/autoencoder.h"
#include "pipeline/models/model.h"
#include "pipeline/models/unet.h"
#include "pipeline/samplers/flow_sampler.h"

namespace rtvd {

namespace {

// The ops the builder fills, one helper each. Their byte counts (for the profiler's GB/s) are the least
// traffic: fp32 x, noise and prev, activations v and model_in.

// fp32 (count) -> activations, in each of `copies` images.
Op cast_op(std::string layer, Ref x, Ref y, int64_t count, int copies, int act_bytes) {
  CastOp op;
  op.p.count = count;
  op.p.copies = copies;
  op.x = x;
  op.y = y;
  return Op{std::move(layer), std::move(op), 0, double(count) * (4 + copies * act_bytes)};
}

// The sampler's linear step (GuidanceStepParams): x <- x_coef x + out_coef guided(v) + noise_coef noise, and
// model_in <- input_scale x in each of its `copies` images. v: (v_batch, count) activations or none; noise:
// fp32 or none; model_in: none on no step.
struct LinearStep {
  Ref v{};
  int v_batch = 1;
  float guidance = 1.0f;
  Ref noise{};
  Ref model_in{};
  int copies = 1;
  float x_coef = 1.0f, out_coef = 0.0f, noise_coef = 0.0f, input_scale = 1.0f;
};

Op sampler_step_op(std::string layer, Ref x, int64_t count, const LinearStep& s, int act_bytes) {
  GuidanceStepOp op;
  op.p.count = count;
  op.p.batch = s.v_batch;
  op.p.copies = s.copies;
  op.p.guidance = s.guidance;
  op.p.x_coef = s.x_coef;
  op.p.out_coef = s.out_coef;
  op.p.noise_coef = s.noise_coef;
  op.p.input_scale = s.input_scale;
  op.v = s.v;
  op.x = x;
  op.noise = s.noise;
  op.model_in = s.model_in;
  const double bytes = (s.v ? s.v_batch * act_bytes : 0) + 8 + (s.noise ? 4 : 0) + s.copies * act_bytes;
  return Op{std::move(layer), std::move(op), 0, double(count) * bytes};
}

// denoise_blend: x' = x_coef x + out_coef guided(v) (x none: out_coef v, an image to show), prev <- blend(x',
// prev), rgba <- to_rgba8(prev) and the non-finite flag, over (height, width, channels).
struct Present {
  Ref v{};
  int v_batch = 1;
  float guidance = 1.0f;
  Ref x{};
  float x_coef = 1.0f, out_coef = 1.0f;
};

Op present_op(std::string layer, const FramePlan& plan, int channels, const Present& s, float blend, int act_bytes) {
  DenoiseBlendOp op;
  op.p.h = plan.height;
  op.p.w = plan.width;
  op.p.c = channels;
  op.p.batch = s.v_batch;
  op.p.guidance = s.guidance;
  op.p.x_coef = s.x_coef;
  op.p.out_coef = s.out_coef;
  op.p.blend = blend;
  op.v = s.v;
  op.x = s.x;
  op.prev = plan.prev;
  op.rgba = plan.rgba;
  op.nonfinite = plan.nonfinite;
  const double pixels = double(plan.width) * plan.height;
  return Op{std::move(layer), std::move(op), 0,
            pixels * channels * (s.v_batch * act_bytes + (s.x ? 8 : 0) + 8) + pixels * 4};
}

// The ops emitted into `ops` since `begin`.
OpRange since(const std::vector<Op>& ops, size_t begin) { return {begin, ops.size()}; }

}  // namespace

void add_frame_output(FramePlan& plan) {
  const int64_t pixel_bytes = int64_t(plan.width) * plan.height * 4;
  plan.rgba = plan.graph.add_tensor("rgba", Elem::U8, {pixel_bytes + int64_t(sizeof(int32_t))}, true);
  plan.nonfinite = plan.rgba.at(pixel_bytes);  // 4-byte aligned: the arena aligns each tensor to 256 bytes
}

SamplerPlan frame_sampler(const Model& model, const FrameSettings& s, bool img2img) {
  const float strength = img2img ? s.strength : 1.0f;
  if (!model.scheduler) return flow_sampler_plan(s.steps, strength, model.config.timestep_scale);
  return make_sampler_plan(*model.scheduler, model.scheduler->sampler_for(s.sampler), s.steps, strength);
}

FramePlan build_frame_plan(const Model& model, const SamplerPlan& sp, const FrameSettings& s, bool img2img, int width,
                           int height, int act_bytes) {
  const ModelConfig& cfg = model.config;
  WeightStore& weights = *model.weights;
  // The autoencoder between the image and the sampler's latent; a pixel-space model's is the identity (no
  // autoencoder here): no ops, one latent per pixel, the image's channels the U-Net's.
  const int f = model.pixels_per_latent();
  if (width % f || height % f) fail("internal: ", width, "x", height, " is not a multiple of the latent's ", f);
  const int h = height / f, w = width / f, C = cfg.in_channels, image_channels = model.image_channels();
  const int steps = int(sp.steps.size()), B = sp.batch(s.guidance);
  const int64_t count = int64_t(h) * w * C;

  FramePlan plan;
  plan.sampler = sp;
  plan.batch = B;
  plan.width = width;
  plan.height = height;
  plan.latent_width = w;
  plan.latent_height = h;
  Graph& g = plan.graph;
  plan.sample = g.add_tensor("sample", Elem::F32, {1, h, w, C}, true);
  plan.prev = g.add_tensor("previous_frame", Elem::F32, {1, height, width, image_channels}, true);
  add_frame_output(plan);
  // fp32 from the host (a plain copy; the device converts it where an encoder takes activations).
  if (img2img) plan.image = g.add_tensor("image", Elem::F32, {1, height, width, image_channels}, true);
  if (cfg.num_class_embeds > 0) plan.class_ids = g.add_tensor("class_ids", Elem::I32, {B}, true);
  if (cfg.cross_attention_dim > 0)
    plan.context = g.add_tensor("context", Elem::Act, {B, cfg.context_length, cfg.cross_attention_dim}, true);
  // Fresh noise for the steps that add it (LCM's), one (1, h, w, C) slice per such step, written by the host.
  for (int i = 0; i < steps; ++i)
    if (sp.steps[i].noise_coef != 0.0f) plan.noise_steps.push_back(i);
  if (!plan.noise_steps.empty())
    plan.noise = g.add_tensor("step_noise", Elem::F32, {int64_t(plan.noise_steps.size()), h, w, C}, true);

  // condition: the step's models' setup ops. The U-Net's time embedding takes t in [0, 1] (times its
  // timestep_scale, in which the sampler's timesteps are).
  UNetBuilder unet(cfg, weights, g, B, act_bytes);
  const CrossContext cross = unet.cross_context(plan.context);
  std::vector<StepConditioning> cond;
  for (int i = 0; i < steps; ++i)
    cond.push_back(unet.conditioning(sp.steps[i].timestep / cfg.timestep_scale, plan.class_ids, cat("step", i)));
  plan.stages.condition = {0, g.setup.size()};

  std::unique_ptr<AutoencoderBuilder> vae;
  if (model.autoencoder) vae = make_autoencoder_builder(*model.autoencoder, weights, g, g.frame, act_bytes);
  const Ref model_in = g.add_tensor("model_input", Elem::Act, {B, h, w, C});

  // encode, then start: x = start_noise_coef noise + start_latent_coef latent, and the first model input. The
  // latent term comes in the type it is made in: an encoder's activations (the op's v), or the identity's
  // latent, the image itself in fp32 as the host wrote it (the op's fp32 term).
  LinearStep start{.model_in = model_in, .copies = B, .x_coef = sp.start_noise_coef,
                   .input_scale = sp.steps[0].input_scale};
  if (img2img && vae) {
    const int64_t pixels = int64_t(height) * width * image_channels;
    const Ref image = g.add_tensor("image_act", Elem::Act, {1, height, width, image_channels});
    g.frame.push_back(cast_op("image", plan.image, image, pixels, 1, act_bytes));
    start.v = vae->encode(image, height, width);  // (1, h, w, C), scaled
    start.out_coef = sp.start_latent_coef;
  } else if (img2img) {
    start.noise = plan.image;
    start.noise_coef = sp.start_latent_coef;
  }
  plan.stages.encode = since(g.frame, 0);
  g.frame.push_back(sampler_step_op("sampler.start", plan.sample, count, start, act_bytes));
  plan.stages.start = since(g.frame, plan.stages.encode.end);

  // Fusion: with nothing to decode, nothing stands between the last step and the blend, so the last step, the
  // blend and RGBA8 are one op (one pass over memory). Else the last step writes the decoder's input.
  const bool fuse_last_step = !vae;
  const Ref decoder_in = fuse_last_step ? Ref{} : g.add_tensor("decoder_input", Elem::Act, {1, h, w, C});
  int noise_index = 0;
  std::vector<Ref> deep(steps);  // each step's U-Net feature for the cached frame
  for (int i = 0; i < steps; ++i) {
    const SamplerStep& st = sp.steps[i];
    DenoiseStage& stage = plan.stages.steps.emplace_back();
    const size_t models = g.frame.size();
    const Ref out = unet.forward(model_in, h, w, cond[i], cross, cat("step", i), &deep[i]);  // (B, h, w, C)
    stage.models.push_back(since(g.frame, models));
    const bool last = i + 1 == steps;
    if (last && fuse_last_step) {
      if (st.noise_coef != 0.0f) fail("internal: the last step adds noise, which denoise_blend does not");
      const Present fused{out, B, s.guidance, plan.sample, st.x_coef, st.out_coef};
      plan.stages.present = {g.frame.size(), g.frame.size() + 1};
      g.frame.push_back(present_op(cat("sampler.step", i, "+blend+rgba8"), plan, image_channels, fused, s.blend,
                                   act_bytes));
      stage.update = plan.stages.present;
      continue;
    }
    LinearStep update{.v = out, .v_batch = B, .guidance = s.guidance, .model_in = last ? decoder_in : model_in,
                      .copies = last ? 1 : B, .x_coef = st.x_coef, .out_coef = st.out_coef,
                      .input_scale = last ? 1.0f : sp.steps[i + 1].input_scale};
    if (st.noise_coef != 0.0f) {
      update.noise = plan.noise.at(int64_t(noise_index++) * count);
      update.noise_coef = st.noise_coef;
    }
    const size_t begin = g.frame.size();
    g.frame.push_back(sampler_step_op(cat("sampler.step", i), plan.sample, count, update, act_bytes));
    stage.update = since(g.frame, begin);
  }

  if (!fuse_last_step) {
    const size_t begin = g.frame.size();
    const Ref image = vae->decode(decoder_in, h, w);  // (1, height, width, 3) in [-1, 1]
    plan.stages.decode = since(g.frame, begin);
    plan.stages.present = {g.frame.size(), g.frame.size() + 1};
    g.frame.push_back(present_op("decoded+blend+rgba8", plan, image_channels, Present{.v = image}, s.blend, act_bytes));
  }
  if (s.cache_refresh > 0) add_cached_frame(plan, unet, model_in, cond, cross, deep);
  return plan;
}

}  // namespace rtvd
