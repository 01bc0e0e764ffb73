#include "pipeline/latent_frame_plan.h"

#include <algorithm>

#include "base/checked_math.h"
#include "base/error.h"
#include "pipeline/models/autoencoder.h"
#include "pipeline/models/unet.h"

namespace rtvd {

namespace {

// The sampler's step op: x <- x_coef x + out_coef guided(v) + noise_coef noise; model_in <- input_scale x.
GuidanceStepOp sampler_step(Ref v, int batch, float guidance, Ref x, Ref noise, Ref model_in, int copies,
                            int64_t count, float x_coef, float out_coef, float noise_coef, float input_scale) {
  GuidanceStepOp op;
  op.p.count = count;
  op.p.batch = batch;
  op.p.copies = copies;
  op.p.guidance = guidance;
  op.p.x_coef = x_coef;
  op.p.out_coef = out_coef;
  op.p.noise_coef = noise_coef;
  op.p.input_scale = input_scale;
  op.v = v;
  op.x = x;
  op.noise = noise;
  op.model_in = model_in;
  return op;
}

// Channels of the autoencoder's activations at the image's own size: the first level's, the widest there.
int widest_image_channels(const AutoencoderConfig& c) {
  if (c.tiny()) {
    const auto& t = std::get<AutoencoderTinyConfig>(c.model);
    return std::max(t.encoder_block_out_channels.front(), t.decoder_block_out_channels.back());
  }
  return std::get<AutoencoderKLConfig>(c.model).block_out_channels.front();
}

}  // namespace

FrameMemory latent_frame_memory(const ModelConfig& unet, const AutoencoderConfig& autoencoder, const WeightStore& weights,
                                int width, int height, int batch, int steps, int act_bytes) {
  const int f = autoencoder.latent().pixels_per_latent;
  FrameMemory m = frame_memory(unet, std::max(1, width / f), std::max(1, height / f), batch, steps, act_bytes);
  const std::string what = cat(unet.name, " at ", width, "x", height);
  m.weights = checked_mul(weights.checkpoint_parameters(), act_bytes, what);
  const int64_t pixels = checked_mul(width, height, what);
  const int64_t widest = checked_mul(pixels, widest_image_channels(autoencoder), what);
  m.activations = checked_add(m.activations, checked_mul(3 * widest, act_bytes, what), what);
  m.activations = checked_add(m.activations, checked_mul(pixels, 3 * act_bytes + 3 * 4 + 4, what), what);
  return m;
}

FramePlan build_latent_frame_plan(const LatentModel& m, WeightStore& weights, const FrameSettings& s, bool img2img,
                                  int width, int height, int act_bytes) {
  const ModelConfig& cfg = m.unet;
  const int f = m.autoencoder.latent().pixels_per_latent, C = cfg.in_channels;
  if (width % f || height % f) fail("internal: ", width, "x", height, " is not a multiple of the latent's ", f);
  const int h = height / f, w = width / f, B = frame_batch(s, true);
  const int64_t count = int64_t(h) * w * C;
  const SamplerPlan& sp = m.sampler;
  const int steps = int(sp.steps.size());

  FramePlan plan;
  plan.batch = B;
  plan.width = width;
  plan.height = height;
  plan.latent_width = w;
  plan.latent_height = h;
  Graph& g = plan.graph;
  // The sample starts as noise written by the host (the latent noise walk); img2img adds the encoded image.
  plan.sample = g.add_tensor("latent", Elem::F32, {1, h, w, C}, true);
  plan.prev = g.add_tensor("previous_frame", Elem::F32, {1, height, width, 3}, true);
  add_frame_output(plan);
  // fp32 from the host (a plain copy; the GPU converts it, rather than the host element by element).
  if (img2img) plan.image = g.add_tensor("image", Elem::F32, {1, height, width, 3}, true);
  if (cfg.cross_attention_dim > 0)
    plan.context = g.add_tensor("context", Elem::Act, {B, cfg.context_length, cfg.cross_attention_dim}, true);
  // Fresh noise for the steps that add it (LCM's), one (1, h, w, C) slice per such step, written by the host.
  for (int i = 0; i < steps; ++i)
    if (sp.steps[i].noise_coef != 0.0f) plan.noise_steps.push_back(i);
  if (!plan.noise_steps.empty())
    plan.noise = g.add_tensor("step_noise", Elem::F32, {int64_t(plan.noise_steps.size()), h, w, C}, true);

  UNetBuilder unet(cfg, weights, g, B, act_bytes);
  const CrossContext cross = unet.cross_context(plan.context);
  std::vector<StepConditioning> cond;
  // The U-Net's time embedding takes t in [0, 1] times timestep_scale (1000 for diffusers' U-Nets).
  for (int i = 0; i < steps; ++i)
    cond.push_back(unet.conditioning(sp.steps[i].timestep / cfg.timestep_scale, {}, cat("step", i)));

  const std::unique_ptr<AutoencoderBuilder> vae = make_autoencoder_builder(m.autoencoder, weights, g, g.frame, act_bytes);
  const Ref model_in = g.add_tensor("model_input", Elem::Act, {B, h, w, C});
  // x_start = start_latent_coef * encode(image) + start_noise_coef * noise, and the first model input.
  Ref latent;
  if (img2img) {
    const int64_t pixels = int64_t(height) * width * 3;
    CastOp cast;
    cast.p.count = pixels;
    cast.p.copies = 1;
    cast.x = plan.image;
    cast.y = g.add_tensor("image_act", Elem::Act, {1, height, width, 3});
    const Ref image = cast.y;
    g.frame.push_back(Op{"image", std::move(cast), 0, double(pixels) * (4 + act_bytes)});
    latent = vae->encode(image, height, width);  // (1, h, w, C), scaled
  }
  g.frame.push_back(Op{"sampler.start",
                       sampler_step(latent, 1, 1.0f, plan.sample, {}, model_in, B, count, sp.start_noise_coef,
                                    sp.start_latent_coef, 0.0f, sp.steps[0].input_scale),
                       0, double(count) * (4 + 4 + B * act_bytes + (img2img ? act_bytes : 0))});

  const Ref decoder_in = g.add_tensor("decoder_input", Elem::Act, {1, h, w, C});
  int noise_index = 0;
  for (int i = 0; i < steps; ++i) {
    const SamplerStep& st = sp.steps[i];
    const Ref out = unet.forward(model_in, h, w, cond[i], cross, cat("step", i));  // (B, h, w, C)
    const bool last = i + 1 == steps;
    Ref noise;
    if (st.noise_coef != 0.0f) noise = plan.noise.at(int64_t(noise_index++) * count);
    g.frame.push_back(Op{cat("sampler.step", i),
                         sampler_step(out, B, s.guidance, plan.sample, noise, last ? decoder_in : model_in,
                                      last ? 1 : B, count, st.x_coef, st.out_coef, st.noise_coef,
                                      last ? 1.0f : sp.steps[i + 1].input_scale),
                         0, double(count) * (B * act_bytes + 8 + (noise ? 4 : 0) + (last ? 1 : B) * act_bytes)});
  }

  const Ref image = vae->decode(decoder_in, h, w);  // (1, height, width, 3) in [-1, 1]
  DenoiseBlendOp show;
  show.p.h = height;
  show.p.w = width;
  show.p.c = 3;
  show.p.batch = 1;
  show.p.out_coef = 1.0f;
  show.p.blend = s.blend;
  show.v = image;
  show.prev = plan.prev;
  show.rgba = plan.rgba;
  show.nonfinite = plan.nonfinite;
  plan.blend_op = g.frame.size();
  g.frame.push_back(Op{"decoded+blend+rgba8", std::move(show), 0, double(width) * height * (3 * act_bytes + 8 + 4)});
  return plan;
}

}  // namespace rtvd
