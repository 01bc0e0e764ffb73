#include "pipeline/frame_plan.h"

#include <cmath>
#include <memory>

#include "base/error.h"
#include "kernels/canny/canny.h"
#include "pipeline/cached_frame.h"
#include "pipeline/models/autoencoder.h"
#include "pipeline/models/controlnet.h"
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
  Ref x_out{};  // none: x in place
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
  op.x_out = s.x_out;
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
  int64_t v_half = 0;  // elements from a conditional value to its unconditional one; 0: one frame's
  float guidance = 1.0f;
  Ref x{};
  float x_coef = 1.0f, out_coef = 1.0f;
};

// Frame `frame` of the plan's group: its own RGBA8 pixels and flag in plan.rgba.
Op present_op(std::string layer, const FramePlan& plan, int frame, int channels, const Present& s, float blend,
              int act_bytes) {
  DenoiseBlendOp op;
  op.p.h = plan.height;
  op.p.w = plan.width;
  op.p.c = channels;
  op.p.batch = s.v_batch;
  op.p.v_half = s.v_half;
  op.p.guidance = s.guidance;
  op.p.x_coef = s.x_coef;
  op.p.out_coef = s.out_coef;
  op.p.blend = blend;
  op.v = s.v;
  op.x = s.x;
  op.prev = plan.prev;
  op.rgba = plan.rgba.at(frame * plan.frame_bytes());
  op.nonfinite = plan.nonfinite.at(frame * plan.frame_bytes());
  const double pixels = double(plan.width) * plan.height;
  return Op{std::move(layer), std::move(op), 0,
            pixels * channels * (s.v_batch * act_bytes + (s.x ? 8 : 0) + 8) + pixels * 4};
}

// Residuals of the conditional half alone (guess mode with guidance: the nets ran on it) as residuals of the
// whole batch [cond | uncond], the unconditional half zero, as diffusers pads them (torch.zeros_like): each
// copied into the first half, and 0 times it into the second, by ops appended to `ops` (a frame list).
ControlResiduals with_unconditional_zeros(Graph& g, std::vector<Op>& ops, const ControlResiduals& r,
                                          const std::string& tag, int act_bytes) {
  const auto pad = [&](Ref half, const std::string& name) {
    std::vector<int64_t> shape = g.tensors.at(half.id).shape;
    const int64_t count = g.tensors.at(half.id).numel();
    shape[0] *= 2;
    const Ref full = g.add_tensor(cat(tag, ".", name), Elem::Act, shape);
    for (int uncond = 0; uncond < 2; ++uncond) {
      ScaleActivationOp op;
      op.p.count = count;
      op.p.in_scale = op.p.out_scale = uncond ? 0.0f : 1.0f;
      op.x = half;
      op.y = full.at(uncond * count);
      ops.push_back(Op{cat(tag, ".", name, uncond ? ".uncond_zero" : ".cond"), std::move(op), 0,
                       2.0 * act_bytes * double(count)});
    }
    return full;
  };
  ControlResiduals out;
  for (size_t i = 0; i < r.down.size(); ++i) out.down.push_back(pad(r.down[i], cat("down", i)));
  if (r.mid) out.mid = pad(r.mid, "mid");
  return out;
}

// Net k's control image as activations (net_batch, height, width, channels) in [0, 1], each frame's in
// net_batch / group images: the source image's Canny edges (fp32 0 or 1, at the thresholds
// plan.canny_thresholds[k]), or an image in [-1, 1] mapped to [0, 1] on the device: the source image itself, or
// the host's (plan.control_images[k], which comes as a source's frames do).
Ref add_control_image(FramePlan& plan, const ModelControlNet& net, size_t k, const ControlNetSettings& s,
                      int net_batch, int image_channels, int act_bytes) {
  Graph& g = plan.graph;
  const int cc = net.config.conditioning_channels, group = plan.group, height = plan.height, width = plan.width;
  const std::string layer = cat(controlnet_weight_prefix(k), "image");
  const ControlPreprocessor pre = s.preprocessor;
  if (pre != ControlPreprocessor::Image && cc != image_channels)
    fail(net.source, ": reads ", cc, "-channel control images, the source image has ", image_channels,
         ": give it a control image file");
  plan.control_images.push_back(
      pre == ControlPreprocessor::Image ? g.add_tensor(cat("control_image.", k), Elem::F32, {group, height, width, cc}, true)
                                        : Ref{});
  plan.canny_thresholds.push_back(
      pre == ControlPreprocessor::Canny ? g.add_tensor(cat("canny_thresholds.", k), Elem::I32, {2}, true) : Ref{});
  Ref image = pre == ControlPreprocessor::Source ? plan.image : plan.control_images[k];
  if (pre == ControlPreprocessor::Canny) {
    image = g.add_tensor(cat("canny.", k), Elem::F32, {group, height, width, kCannyOutChannels});
    g.frame.push_back(Op{cat(controlnet_weight_prefix(k), "canny"),
                         canny_op(g, plan.image, plan.canny_thresholds[k], image, group, height, width, image_channels)});
  }
  const int64_t n = int64_t(group) * height * width * cc;
  const Ref act = g.add_tensor(cat("control_image_act.", k), Elem::Act, {net_batch, height, width, cc});
  g.frame.push_back(cast_op(layer, image, act, n, net_batch / group, act_bytes));
  if (pre != ControlPreprocessor::Canny) {
    ScaleActivationOp op;  // in place: (x + 1) / 2
    op.p.count = n * (net_batch / group);
    op.p.in_scale = op.p.in_shift = 0.5f;
    op.x = op.y = act;
    const double bytes = 2.0 * act_bytes * double(op.p.count);
    g.frame.push_back(Op{layer + ".to_unit", std::move(op), 0, bytes});
  }
  return act;
}

// The ops emitted into `ops` since `begin`.
OpRange since(const std::vector<Op>& ops, size_t begin) { return {begin, ops.size()}; }

}  // namespace

void add_frame_output(FramePlan& plan) {
  plan.rgba = plan.graph.add_tensor("rgba", Elem::U8, {plan.group * plan.frame_bytes()}, true);
  plan.nonfinite = plan.rgba.at(plan.pixel_bytes());  // 4-byte aligned: the arena aligns each tensor to 256 bytes
}

std::vector<float> sdxl_time_ids(int width, int height) {
  const float h = float(height), w = float(width);
  return {h, w, 0.0f, 0.0f, h, w};
}

SamplerPlan frame_sampler(const Model& model, const FrameSettings& s, bool img2img) {
  const float strength = img2img ? s.strength : 1.0f;
  if (!model.scheduler) return flow_sampler_plan(s.steps, strength, model.config.timestep_scale);
  return make_sampler_plan(*model.scheduler, model.scheduler->sampler_for(s.sampler), s.steps, strength);
}

bool controlnet_runs(const ControlNetSettings& s, int i, int n) {
  return !(double(i) / n < s.start || double(i + 1) / n > s.end);
}

void check_controlnet_settings(const Model& model, const FrameSettings& s, bool img2img, int steps) {
  for (size_t k = 0; k < s.controlnets.size(); ++k) {
    if (k >= model.controlnets.size())
      fail("ControlNet ", k + 1, ": settings for ", s.controlnets.size(), " nets, the model has ",
           model.controlnets.size());
    const ControlNetSettings& c = s.controlnets[k];
    const std::string net = cat("ControlNet ", k + 1, " (", model.controlnets[k].source, ")");
    if (!std::isfinite(c.scale)) fail(net, ": its scale must be a finite number, got ", c.scale);
    if (!(c.start >= 0 && c.end <= 1 && c.start < c.end))
      fail(net, ": --control-start ", c.start, " and --control-end ", c.end, ": expected 0 <= start < end <= 1");
    if (c.preprocessor != ControlPreprocessor::Image && !img2img)
      fail(net, ": --control ", c.preprocessor == ControlPreprocessor::Canny ? "canny" : "source",
           " reads the frame's source image: give a --source, or a control image file");
  }
  if (model.controlnets.empty()) return;
  if (s.stream_batch > 1 && steps > 1)
    fail("--controlnet with --stream-batch ", s.stream_batch, " at ", steps, " steps: the frames in flight sit at "
         "different steps and keep no control images of their own; with ControlNets a stream batch takes frames of "
         "one step (img2img: --steps 2 --strength 0.5), else use --stream-batch 1");
}

bool set_controlnet_scale(FramePlan& plan, size_t k, float scale) {
  bool changed = false;
  for (const FramePlan::ScaledOp& o : plan.controlnet_scaled_ops.at(k)) {
    float& in_scale = std::get<ScaleActivationOp>(plan.graph.frame_ops(o.list).at(o.op).body).p.in_scale;
    changed = changed || in_scale != scale * o.factor;
    in_scale = scale * o.factor;
  }
  for (const FramePlan::ListOps& r : plan.controlnet_ops.at(k))
    for (size_t i = r.ops.begin; i < r.ops.end; ++i) {
      Op& op = plan.graph.frame_ops(r.list).at(i);
      changed = changed || op.off != (scale == 0.0f);
      op.off = scale == 0.0f;
    }
  return changed;
}

void check_stream_batch(int stream_batch, int steps) {
  if (stream_batch < 1 || stream_batch > kMaxStreamBatch)
    fail("--stream-batch ", stream_batch, ": expected 1 to ", kMaxStreamBatch, " frames in flight");
  if (stream_batch > 1 && stream_batch % steps)
    fail("--stream-batch ", stream_batch, ": expected a multiple of the ", steps, " denoising step",
         steps == 1 ? "" : "s", " that run (each U-Net call advances every frame in flight by one step)");
}

// Two shapes of one frame (frame_plan.h). One at a time (stream batch 1): each step runs the models on the
// frame's model input and its update writes the next step's in place. A stream batch of K frames: `slots`
// groups of `group` frames, the group in slot j at step j, stacked into one batch of the models, [cond | uncond]
// within each group; every call the new group enters slot 0 (start), the models run once, and the updates, from
// the last slot down, move each group's x and model input to the next slot (so that a slot is read before it
// is written), the last slot's group leaving to decode and present.
FramePlan build_frame_plan(const Model& model, const SamplerPlan& sp, const FrameSettings& s, bool img2img, int width,
                           int height, int act_bytes) {
  const ModelConfig& cfg = model.config;
  WeightStore& weights = *model.weights;
  // The autoencoder between the image and the sampler's latent; a pixel-space model's is the identity (no
  // autoencoder here): no ops, one latent per pixel, the image's channels the U-Net's.
  const int f = model.pixels_per_latent();
  if (width % f || height % f) fail("internal: ", width, "x", height, " is not a multiple of the latent's ", f);
  const int h = height / f, w = width / f, C = cfg.in_channels, image_channels = model.image_channels();
  const int steps = int(sp.steps.size()), halves = sp.batch(s.guidance);
  check_stream_batch(s.stream_batch, steps);
  const bool pipelined = s.stream_batch > 1;
  const int slots = pipelined ? steps : 1, group = pipelined ? s.stream_batch / steps : 1;
  const int B = slots * halves * group;             // the models' batch
  const int64_t count = int64_t(h) * w * C;         // one frame's latent
  const int64_t group_count = group * count;        // one group's
  const int64_t pixels = int64_t(height) * width * image_channels;

  FramePlan plan;
  plan.sampler = sp;
  plan.batch = B;
  plan.halves = halves;
  plan.stream = s.stream_batch;
  plan.group = group;
  plan.width = width;
  plan.height = height;
  plan.latent_width = w;
  plan.latent_height = h;
  Graph& g = plan.graph;
  plan.sample = g.add_tensor("sample", Elem::F32, {slots * group, h, w, C}, true);
  plan.prev = g.add_tensor("previous_frame", Elem::F32, {1, height, width, image_channels}, true);
  add_frame_output(plan);
  // fp32 from the host (a plain copy; the device converts it where an encoder takes activations).
  if (img2img) plan.image = g.add_tensor("image", Elem::F32, {group, height, width, image_channels}, true);
  if (cfg.num_class_embeds > 0) plan.class_ids = g.add_tensor("class_ids", Elem::I32, {B}, true);
  if (cfg.cross_attention_dim > 0)
    plan.context = g.add_tensor("context", Elem::Act, {B, cfg.context_length, cfg.cross_attention_dim}, true);
  if (cfg.text_time()) {
    plan.text_embeds = g.add_tensor("text_embeds", Elem::Act, {B, cfg.text_embeds_dim()}, true);
    plan.time_ids = g.add_tensor("time_ids", Elem::F32, {B, ModelConfig::kTimeIds}, true);
  }
  // Fresh noise for the steps that add it (LCM's, Euler ancestral's), one (group, h, w, C) slice per such step,
  // written by the host.
  for (int i = 0; i < steps; ++i)
    if (sp.steps[i].noise_coef != 0.0f) plan.noise_steps.push_back(i);
  if (!plan.noise_steps.empty())
    plan.noise = g.add_tensor("step_noise", Elem::F32, {int64_t(plan.noise_steps.size()) * group, h, w, C}, true);

  // condition: the step's models' setup ops. The U-Net's time embedding takes t in [0, 1] (times its
  // timestep_scale, in which the sampler's timesteps are); a stream batch's groups each at their own step.
  UNetBuilder unet(cfg, weights, g, B, act_bytes);
  const CrossContext cross = unet.cross_context(plan.context);
  // SDXL: the added embedding, the same at every step, which each step's conditioning adds to its time embedding.
  const Ref added = cfg.text_time() ? unet.added_embedding(plan.text_embeds, plan.time_ids) : Ref{};
  std::vector<StepConditioning> cond;
  if (pipelined) {
    std::vector<double> t;
    for (const SamplerStep& st : sp.steps) t.push_back(st.timestep / cfg.timestep_scale);
    cond.push_back(unet.conditioning(t, plan.class_ids, "steps", added));
  } else {
    for (int i = 0; i < steps; ++i)
      cond.push_back(
          unet.conditioning(sp.steps[i].timestep / cfg.timestep_scale, plan.class_ids, cat("step", i), added));
  }
  // The ControlNets' setup ops, each from its own weights: with guess mode and guidance they run on the
  // conditional half alone (the first of the batch), else on the whole model input, as diffusers does.
  check_controlnet_settings(model, s, img2img, steps);
  const size_t nets = model.controlnets.size();
  const bool cond_half_only = s.guess_mode && halves == 2;
  const int net_batch = cond_half_only ? B / 2 : B;
  std::vector<ControlNetSettings> net_settings(nets);
  std::copy(s.controlnets.begin(), s.controlnets.end(), net_settings.begin());
  plan.controlnet_scaled_ops.resize(nets);
  plan.controlnet_ops.resize(nets);
  std::vector<std::unique_ptr<ControlNetBuilder>> net_builders;
  std::vector<CrossContext> net_cross;
  std::vector<std::vector<StepConditioning>> net_cond(nets, std::vector<StepConditioning>(steps));
  for (size_t k = 0; k < nets; ++k) {
    ControlNetBuilder& net = *net_builders.emplace_back(std::make_unique<ControlNetBuilder>(
        model.controlnets[k].config, weights, g, net_batch, act_bytes, controlnet_weight_prefix(k)));
    net_cross.push_back(net.cross_context(plan.context));
    const Ref net_added = cfg.text_time() ? net.added_embedding(plan.text_embeds, plan.time_ids) : Ref{};
    for (int i = 0; i < steps; ++i)
      if (controlnet_runs(net_settings[k], i, steps))
        net_cond[k][i] =
            net.conditioning(sp.steps[i].timestep / cfg.timestep_scale, plan.class_ids, cat("step", i), net_added);
  }
  plan.stages.condition = {0, g.setup.size()};

  std::unique_ptr<AutoencoderBuilder> vae;
  if (model.autoencoder) vae = make_autoencoder_builder(*model.autoencoder, weights, g, g.frame, act_bytes, group);
  // A stream batch's model inputs carry over to the next call: persistent.
  const Ref model_in = g.add_tensor("model_input", Elem::Act, {B, h, w, C}, pipelined);
  const auto slot_x = [&](int j) { return plan.sample.at(j * group_count); };
  const auto slot_input = [&](int j) { return model_in.at(j * halves * group_count); };

  // The control images, first in encode.
  std::vector<Ref> control_act;
  for (size_t k = 0; k < nets; ++k)
    control_act.push_back(add_control_image(plan, model.controlnets[k], k, net_settings[k], net_batch,
                                            image_channels, act_bytes));
  plan.control_activations = control_act;

  // encode, then start: x = start_noise_coef noise + start_latent_coef latent, and the first model input. The
  // latent term comes in the type it is made in: an encoder's activations (the op's v), or the identity's
  // latent, the image itself in fp32 as the host wrote it (the op's fp32 term).
  LinearStep start{.model_in = slot_input(0), .copies = halves, .x_coef = sp.start_noise_coef,
                   .input_scale = sp.steps[0].input_scale};
  if (img2img && vae) {
    const Ref image = g.add_tensor("image_act", Elem::Act, {group, height, width, image_channels});
    g.frame.push_back(cast_op("image", plan.image, image, group * pixels, 1, act_bytes));
    start.v = vae->encode(image, height, width);  // (group, h, w, C), scaled
    start.out_coef = sp.start_latent_coef;
  } else if (img2img) {
    start.noise = plan.image;
    start.noise_coef = sp.start_latent_coef;
  }
  plan.stages.encode = since(g.frame, 0);
  g.frame.push_back(sampler_step_op("sampler.start", slot_x(0), group_count, start, act_bytes));
  plan.stages.start = since(g.frame, plan.stages.encode.end);

  // Fusion: with nothing to decode, nothing stands between the last step and the blend, so the last step, the
  // blend and RGBA8 are one op per frame (one pass over memory). Else the last step writes the decoder's input.
  const bool fuse_last_step = !vae;
  const Ref decoder_in = fuse_last_step ? Ref{} : g.add_tensor("decoder_input", Elem::Act, {group, h, w, C});
  // The frames' presents, in frame order: each blends into the history the one before left.
  const auto present = [&](const std::string& layer, Present frame_of, int64_t frame_stride) {
    const size_t begin = g.frame.size();
    for (int i = 0; i < group; ++i) {
      Present p = frame_of;
      p.v = frame_of.v.at(i * frame_stride);
      if (p.x) p.x = p.x.at(i * count);
      g.frame.push_back(present_op(group == 1 ? layer : cat(layer, ".", i), plan, i, image_channels, p, s.blend,
                                   act_bytes));
    }
    plan.stages.present = since(g.frame, begin);
  };
  std::vector<Ref> deep(steps);  // each step's U-Net feature for the feature cache's cached frame (one at a time)
  // The update of the step of slot `slot` (a step's own slot when one at a time), reading the models' output
  // for that slot's frames.
  int noise_index = 0;
  const auto update = [&](int i, int slot, Ref out) {
    const SamplerStep& st = sp.steps[i];
    const Ref v = out.at(slot * halves * group_count);
    const bool last = i + 1 == steps;
    const size_t begin = g.frame.size();
    if (last && fuse_last_step) {
      if (st.noise_coef != 0.0f) fail("internal: the last step adds noise, which denoise_blend does not");
      present(cat("sampler.step", i, "+blend+rgba8"),
              Present{v, halves, group_count, s.guidance, slot_x(slot), st.x_coef, st.out_coef}, count);
      return plan.stages.present;
    }
    LinearStep u{.v = v, .v_batch = halves, .guidance = s.guidance, .copies = last ? 1 : halves, .x_coef = st.x_coef,
                 .out_coef = st.out_coef, .input_scale = last ? 1.0f : sp.steps[i + 1].input_scale};
    u.model_in = last ? decoder_in : slot_input(pipelined ? slot + 1 : slot);
    if (pipelined && !last) u.x_out = slot_x(slot + 1);
    if (st.noise_coef != 0.0f) {
      u.noise = plan.noise.at(int64_t(noise_index++) * group_count);
      u.noise_coef = st.noise_coef;
    }
    g.frame.push_back(sampler_step_op(cat("sampler.step", i), slot_x(slot), group_count, u, act_bytes));
    return since(g.frame, begin);
  };

  // The nets that run at step i, each a branch of the frame (beside the U-Net's down path and the other nets) that
  // makes its own residuals, which the U-Net adds. With a stream batch there are nets only where every frame in
  // flight is at step 0 (check_controlnet_settings): the control images are those of the group that entered.
  const auto run_nets = [&](int i, DenoiseStage& stage) {
    std::vector<ControlResiduals> residuals;
    for (size_t k = 0; k < nets; ++k) {
      if (!controlnet_runs(net_settings[k], i, steps)) continue;
      const size_t begin = g.frame.size();
      residuals.push_back(net_builders[k]->forward(model_in, control_act[k], h, w, net_cond[k][i], net_cross[k],
                                                   cat("step", i), net_settings[k].scale, s.guess_mode));
      for (const auto& [op, factor] : net_builders[k]->scaled_ops())
        plan.controlnet_scaled_ops[k].push_back({FrameOps::Full, op, factor});
      if (cond_half_only)  // the padding's ops end the net's range
        residuals.back() = with_unconditional_zeros(g, g.frame, residuals.back(),
                                                    cat(controlnet_weight_prefix(k), "step", i, ".residual"), act_bytes);
      stage.models.push_back(since(g.frame, begin));
      plan.controlnet_ops[k].push_back({FrameOps::Full, stage.models.back()});
      g.branches.push_back({stage.models.back().begin, stage.models.back().end});
    }
    return residuals;
  };
  // The U-Net pass's adds of step i's nets' residuals (UNetBuilder::residual_adds), each to its net's ops.
  const auto add_residual_adds = [&](FrameOps list, int i, const std::vector<OpRange>& adds) {
    size_t j = 0;
    for (size_t k = 0; k < nets; ++k)
      if (controlnet_runs(net_settings[k], i, steps)) plan.controlnet_ops[k].push_back({list, adds.at(j++)});
  };

  if (pipelined) {
    // (B, h, w, C): slot j's group [cond | uncond] at step j; the updates from the last slot down.
    DenoiseStage& stage = plan.stages.steps.emplace_back();
    const std::vector<ControlResiduals> residuals = run_nets(0, stage);  // one slot where there are nets
    const size_t models = g.frame.size();
    const Ref out = unet.forward(model_in, h, w, cond[0], cross, "steps", nullptr, residuals);
    stage.models.push_back(since(g.frame, models));
    add_residual_adds(FrameOps::Full, 0, unet.residual_adds());
    const size_t begin = g.frame.size();
    for (int j = steps - 1; j >= 0; --j) {
      noise_index = 0;  // the noise slices are in step order: count the ones before step j
      for (int i = 0; i < j; ++i) noise_index += sp.steps[i].noise_coef != 0.0f;
      update(j, j, out);
    }
    stage.update = since(g.frame, begin);  // with nothing to decode, the last slot's presents first
  } else {
    for (int i = 0; i < steps; ++i) {
      DenoiseStage& stage = plan.stages.steps.emplace_back();
      const std::vector<ControlResiduals> residuals = run_nets(i, stage);
      const size_t models = g.frame.size();
      const Ref out = unet.forward(model_in, h, w, cond[i], cross, cat("step", i), &deep[i], residuals);  // (B, h, w, C)
      stage.models.push_back(since(g.frame, models));
      add_residual_adds(FrameOps::Full, i, unet.residual_adds());
      stage.update = update(i, 0, out);
    }
  }

  if (!fuse_last_step) {
    const size_t begin = g.frame.size();
    const Ref image = vae->decode(decoder_in, h, w);  // (group, height, width, 3) in [-1, 1]
    plan.stages.decode = since(g.frame, begin);
    present("decoded+blend+rgba8", Present{.v = image}, pixels);
  }
  // The cached frame's nets: each net's top level alone, for the skips the cached U-Net pass recomputes.
  const auto cached_nets = [&](int i) {
    std::vector<ControlResiduals> residuals;
    for (size_t k = 0; k < nets; ++k) {
      if (!controlnet_runs(net_settings[k], i, steps)) continue;
      const size_t begin = g.cached_frame.size();
      residuals.push_back(net_builders[k]->forward_cached(model_in, control_act[k], h, w, net_cond[k][i], net_cross[k],
                                                          cat("step", i, ".cached"), net_settings[k].scale,
                                                          s.guess_mode));
      for (const auto& [op, factor] : net_builders[k]->scaled_ops())
        plan.controlnet_scaled_ops[k].push_back({FrameOps::Cached, op, factor});
      if (cond_half_only)
        residuals.back() = with_unconditional_zeros(g, g.cached_frame, residuals.back(),
                                                    cat(controlnet_weight_prefix(k), "step", i, ".cached.residual"),
                                                    act_bytes);
      plan.controlnet_ops[k].push_back({FrameOps::Cached, since(g.cached_frame, begin)});
    }
    return residuals;
  };
  if (s.cache_refresh > 0) {
    const std::vector<std::vector<OpRange>> adds = add_cached_frame(plan, unet, model_in, cond, cross, deep, cached_nets);
    for (size_t i = 0; i < adds.size(); ++i) add_residual_adds(FrameOps::Cached, int(i), adds[i]);
  }
  join_branches(g);
  for (size_t k = 0; k < nets; ++k) set_controlnet_scale(plan, k, net_settings[k].scale);  // at 0: off from the start
  return plan;
}

}  // namespace rtvd
