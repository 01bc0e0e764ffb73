#include "engine.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "build_config.h"
#include "pipeline/device.h"
#include "base/error.h"
#include "pipeline/backends/cancel.h"
#include "pipeline/frame_memory.h"
#include "pipeline/samplers/noise_walk.h"

namespace rtvd {
Engine::Engine(const EngineOptions& o) : device_start_(start_device(o.device)), model_(load_model(o.model)) {
  startup_.lap("model files");
  width_ = o.width > 0 ? o.width : model_.native_size();
  height_ = o.height > 0 ? o.height : model_.native_size();
  if (width_ > kMaxFrameSide || height_ > kMaxFrameSide)
    fail("--size ", width_, "x", height_, ": width and height must be at most ", kMaxFrameSide);
  const int m = model_.size_multiple();
  if (width_ % m || height_ % m)
    fail("--size ", width_, "x", height_, ": width and height must be multiples of ", m, " for this model");
  if (device_start_.valid()) device_start_.wait();
  backend_ = make_backend(o.device, o.threads, o.kernels, &device_note_);
  startup_.lap("backend");
  if (model_.text_encoder) {
    make_text_encoders(o);
    set_prompts(PromptSettings{});
    startup_.lap("text encoder");
  } else if (o.clip_skip != 0) {
    fail("--clip-skip ", o.clip_skip, ": this model has no text encoder");
  }
  // A latent model's first plan is img2img's, which builds every weight (the autoencoder's encoder too, which
  // txt2img leaves out): the checkpoint must hold exactly those tensors, and they are uploaded once, so that a
  // later switch to an image source uploads nothing. A pixel model's identity autoencoder has no weights: its
  // first plan is txt2img's, the frame an engine renders before it is configured.
  configure(FrameSettings{}, model_.latent());
  model_.weights->check_all_read();
  startup_.lap("weights");
}

// The text encoder (SDXL: both) gets a backend of its own (its graph is prepared once, beside the frame's), on
// the device the frames run on.
void Engine::make_text_encoders(const EngineOptions& o) {
  const ModelConfig& c = model_.config;
  const DeviceKind where = backend_->is_cuda() ? DeviceKind::Cuda : DeviceKind::Cpu;
  const auto make = [&] { return make_backend(where, o.threads, o.kernels, nullptr); };
  const std::string label = model_.text_encoder->tensors.label();
  int tokens = 0, width = 0;
  if (model_.text_encoder_2) {
    sdxl_encoder_ = std::make_unique<SdxlPromptEncoder>(
        SdxlTextEncoders{std::move(*model_.text_encoder), std::move(*model_.text_encoder_2), model_.tokenizer_dir,
                         model_.tokenizer_2_dir, model_.force_zeros_for_empty_prompt},
        make, o.clip_skip);
    model_.text_encoder_2.reset();
    tokens = sdxl_encoder_->tokens();
    width = sdxl_encoder_->width();
  } else {
    prompt_encoder_ = std::make_unique<PromptEncoder>(std::move(*model_.text_encoder), model_.tokenizer_dir,
                                                      model_.tokenizer_pad, make(), o.clip_skip);
    tokens = prompt_encoder_->tokens();
    width = prompt_encoder_->width();
  }
  model_.text_encoder.reset();
  if (width != c.cross_attention_dim || tokens != c.context_length)
    fail(label, ": the text encoder", sdxl_encoder_ ? "s give " : " gives ", tokens, " x ", width,
         " embeddings, but the U-Net's cross-attention takes ", c.context_length, " x ", c.cross_attention_dim);
}

void Engine::configure(const FrameSettings& s, bool img2img) {
  if (s.steps < 1 || s.steps > kMaxSteps) fail("steps must be in [1, ", kMaxSteps, "], got ", s.steps);
  if (!(s.guidance >= 0.0f && s.guidance <= kMaxGuidance))
    fail("guidance must be in [0, ", kMaxGuidance, "], got ", s.guidance);
  if (model_.config.num_class_embeds > 0 && (s.class_id < 0 || s.class_id >= model_.config.num_class_embeds))
    fail("class ", s.class_id, " out of range [0, ", model_.config.num_class_embeds, ")");
  if (!(s.skip_similar >= 0.0f && s.skip_similar <= 1.0f))
    fail("skip-similar must be 0 (off) or in (0, 1], got ", s.skip_similar);
  if (s.cache_refresh < 0 || s.cache_refresh > kMaxCacheRefresh)
    fail("--feature-cache ", s.cache_refresh, ": expected 0 (off) to ", kMaxCacheRefresh, " frames");
  if (s.cache_refresh > 0 && model_.config.levels() < 2)
    fail("--feature-cache ", s.cache_refresh, ": the U-Net of ", model_.config.name,
         " has a single level, none deeper to cache (the cache needs 2 levels or more)");
  if (!(s.cache_similarity >= 0.0f && s.cache_similarity <= 1.0f))
    fail("--cache-similarity ", s.cache_similarity, ": expected 0 (the period alone) to 1");
  if (s.cache_refresh > 0 && s.stream_batch > 1)
    fail("--feature-cache with --stream-batch ", s.stream_batch, ": the cache holds one frame's features, not a "
         "batch's: use --stream-batch 1");
  check_controlnet_settings(model_, s, img2img, int(frame_sampler(model_, s, img2img).steps.size()));
  if (configured_ && s == settings_ && img2img == img2img_) return;
  // Canny's thresholds are an input of the plan and the nets' scales params of its ops: a change of them alone is
  // written, with no new plan.
  const auto without_live = [](FrameSettings f) {
    for (ControlNetSettings& c : f.controlnets) c.canny_low = c.canny_high = 0, c.scale = 0;
    return f;
  };
  if (configured_ && img2img == img2img_ && without_live(s) == without_live(settings_)) {
    settings_ = s;
    write_canny_thresholds();
    write_controlnet_scales();
    return;
  }
  // Settings the sampler cannot run (a strength that leaves no step) and sizes the backend cannot hold are
  // refused before anything changes: the engine keeps its plan, and the GUI its last good settings.
  const SamplerPlan sampler = frame_sampler(model_, s, img2img);
  check_stream_batch(s.stream_batch, int(sampler.steps.size()));
  if (s.skip_similar > 0 && s.stream_batch > 1)
    fail("--skip-similar with --stream-batch ", s.stream_batch, ": the filter skips frames one at a time (a skipped "
         "frame would leave a hole in the batch): use --stream-batch 1");
  check_memory(sampler, s);

  if (has_output()) read_image();  // the new plan's memory no longer holds the last frame
  // Keep the blend history across re-plans so a settings change doesn't flash.
  std::vector<float> previous;
  if (!kept_history_.empty()) {
    previous = std::move(kept_history_);  // a stream batch's, not yet written back: prev holds nothing yet
  } else if (configured_ && !first_frame_) {
    previous.resize(size_t(width_) * height_ * model_.image_channels());
    backend_->read(plan_.prev, previous.data(), previous.size());
  }
  settings_ = s;
  img2img_ = img2img;
  plan_ = build_frame_plan(model_, sampler, s, img2img, width_, height_, int(backend_->act_bytes()));
  similarity_.add_to(plan_, s.skip_similar);
  cache_source_.clear();
  if (!plan_.graph.cached_frame.empty() && s.cache_similarity > 0) cache_source_.add_to(plan_, "feature_cache");
  refresh_requested_ = true;  // the new plan's feature cache holds nothing yet
  backend_->upload_weights(*model_.weights);
  backend_->prepare(plan_.graph);
  if (plan_.class_ids) {
    std::vector<int32_t> ids;  // per slot [class x group | null x group]
    for (int slot = 0; slot < plan_.slots(); ++slot)
      for (int half = 0; half < plan_.halves; ++half)
        ids.insert(ids.end(), plan_.group, half == 0 ? s.class_id : model_.config.null_class());
    backend_->write(plan_.class_ids, ids.data(), ids.size());
  }
  write_canny_thresholds();
  context_t_ = -1;
  write_context(travel_position());  // runs the setup ops

  plan_start_ = frame_;  // a stream batch starts empty: the frames in flight of the old plan are dropped
  kept_history_.clear();
  if (!previous.empty()) {
    if (plan_.pipelined()) kept_history_ = std::move(previous);
    else backend_->write(plan_.prev, previous.data(), previous.size());
  }
  configured_ = true;
}

// The thresholds of each Canny net of the plan, from the settings.
void Engine::write_canny_thresholds() {
  for (size_t k = 0; k < plan_.canny_thresholds.size(); ++k)
    if (plan_.canny_thresholds[k]) {
      const ControlNetSettings& c = settings_.controlnets.at(k);
      const int32_t thresholds[2] = {c.canny_low, c.canny_high};
      backend_->write(plan_.canny_thresholds[k], thresholds, 2);
    }
}

void Engine::read_control_image(size_t net, std::vector<float>& image) {
  if (net >= plan_.control_activations.size()) fail("internal: no ControlNet ", net + 1, " in the plan");
  image.resize(size_t(width_) * height_ * model_.controlnets.at(net).config.conditioning_channels);
  backend_->read(plan_.control_activations[net], image.data(), image.size());
}

// Each net's scale into its ops, in place (at 0 the net is off); the backend re-records what it recorded from them
// (a CUDA graph) only when one changed.
void Engine::write_controlnet_scales() {
  bool changed = false;
  for (size_t k = 0; k < plan_.controlnet_ops.size(); ++k) {
    const float scale = k < settings_.controlnets.size() ? settings_.controlnets[k].scale : ControlNetSettings{}.scale;
    changed = set_controlnet_scale(plan_, k, scale) || changed;
  }
  if (changed) backend_->ops_changed();
}

void Engine::set_control_image(size_t net, const std::vector<float>& rgb) {
  if (net >= model_.controlnets.size()) fail("internal: no ControlNet ", net + 1);
  const size_t values = size_t(width_) * height_ * model_.controlnets[net].config.conditioning_channels;
  if (rgb.size() != values)
    fail("ControlNet ", net + 1, " (", model_.controlnets[net].source, "): a control image of ", rgb.size(),
         " values, expected ", values, " (", width_, "x", height_, ")");
  // A stream batch's group: the image at this frame's place (as gather_source() places the sources) and the places
  // after it in the group, so that frames given no image of their own keep the last one.
  control_images_.resize(model_.controlnets.size());
  std::vector<float>& images = control_images_[net];
  images.resize(values * size_t(std::max(plan_.group, 1)));  // the same capacity frame after frame
  for (size_t at = values * size_t(stepped() % std::max(plan_.group, 1)); at < images.size(); at += values)
    std::copy(rgb.begin(), rgb.end(), images.begin() + ptrdiff_t(at));
}

// Before the plan is built: a size the backend cannot hold is refused with the numbers, not allocated.
void Engine::check_memory(const SamplerPlan& sampler, const FrameSettings& s) const {
  const int steps = int(sampler.steps.size()), act_bytes = int(backend_->act_bytes());
  // The models' batch: every frame in flight (frame_plan.h), in halves with guidance.
  const int batch = sampler.batch(s.guidance) * (s.stream_batch > 1 ? s.stream_batch : 1);
  const FrameMemory need = frame_memory(model_, width_, height_, batch, steps, act_bytes);
  MemoryAvailable available = backend_->memory_available();
  // the new plan reuses them
  available.bytes += int64_t(backend_->arena_bytes() + backend_->weight_bytes() + backend_->workspace_bytes());
  require_memory(cat(model_.config.name, " at --size ", width_, "x", height_), need.total(),
                 cat(need.describe(), "; batch ", batch, ", ", act_bytes == 4 ? "fp32" : "fp16"), available);
}

void Engine::set_prompts(const PromptSettings& p, std::vector<std::string>* notices) {
  if (!has_text_encoder()) {
    if (!p.any()) return;
    const char* flag = !p.prompt.empty() ? "--prompt" : !p.negative_prompt.empty() ? "--negative-prompt" : "--prompt-to";
    fail(flag, ": this model has no text encoder (", model_.source,
         model_.config.num_class_embeds > 0 ? " is class-conditional: choose with --class)" : " takes no prompt)");
  }
  if (p.travel_frames < 1) fail("--travel-frames ", p.travel_frames, ": expected at least 1");
  embed_prompts(p, notices);
  prompts_ = p;
  context_t_ = -1;  // rewritten at the next frame
}

// The contexts (SDXL: and pooled embeddings) of the prompt, the travel's end and the negative prompt.
void Engine::embed_prompts(const PromptSettings& p, std::vector<std::string>* notices) {
  std::string notice;
  const auto noted = [&] {
    if (!notice.empty() && notices) notices->push_back(notice);
  };
  if (prompt_encoder_) {
    const auto embed = [&](const std::string& text, const char* flag) {
      std::vector<float> e = prompt_encoder_->embed(text, flag, &notice);
      noted();
      return e;
    };
    cond_from_ = embed(p.prompt, "--prompt");
    cond_to_ = p.prompt_to.empty() ? std::vector<float>() : embed(p.prompt_to, "--prompt-to");
    uncond_ = embed(p.negative_prompt, "--negative-prompt");
    return;
  }
  SdxlPromptEmbedding from = sdxl_encoder_->embed(p.prompt, "--prompt", &notice);
  noted();
  SdxlPromptEmbedding to;
  if (!p.prompt_to.empty()) {
    to = sdxl_encoder_->embed(p.prompt_to, "--prompt-to", &notice);
    noted();
  }
  SdxlPromptEmbedding negative = sdxl_encoder_->embed_negative(p.negative_prompt, "--negative-prompt", &notice);
  noted();
  cond_from_ = std::move(from.context), pooled_from_ = std::move(from.pooled);
  cond_to_ = std::move(to.context), pooled_to_ = std::move(to.pooled);
  uncond_ = std::move(negative.context), pooled_uncond_ = std::move(negative.pooled);
}

// How far prompt travel has gone at the current frame: 0 at the first frame, 1 from frame travel_frames on.
float Engine::travel_position() const {
  if (cond_to_.empty()) return 0.0f;
  return float(std::min<int64_t>(frame_, prompts_.travel_frames)) / float(prompts_.travel_frames);
}

// The context, per slot of the batch [cond x group | uncond x group] (uncond only with guidance), at travel
// position t; then the setup ops, which turn it into every cross-attention's keys and values. Nothing when
// that context is there already. SDXL's added conditioning goes the same way: the pooled embedding travels as
// the context does, and every slot has the time ids of the frame's size.
void Engine::write_context(float t) {
  if (t == context_t_) return;
  // One value per slot of the batch, the conditional one in the first half.
  const auto per_slot = [&](const std::vector<float>& cond, const std::vector<float>& uncond) {
    std::vector<float> all;
    for (int slot = 0; slot < plan_.slots(); ++slot)
      for (int half = 0; half < plan_.halves; ++half)
        for (int i = 0; i < plan_.group; ++i) {
          const std::vector<float>& one = half == 0 ? cond : uncond;
          all.insert(all.end(), one.begin(), one.end());
        }
    return all;
  };
  const auto travelled = [&](const std::vector<float>& from, const std::vector<float>& to) {
    return to.empty() ? from : slerp(from, to, t);
  };
  if (plan_.context) {
    std::vector<float> context;
    if (has_text_encoder()) {
      context = per_slot(travelled(cond_from_, cond_to_), uncond_);
    } else {  // cross-attention without a text encoder (a bare U-Net config): a zero context
      context.assign(size_t(plan_.batch) * model_.config.context_length * model_.config.cross_attention_dim, 0.0f);
    }
    backend_->write(plan_.context, context.data(), context.size());
  }
  if (plan_.text_embeds) {
    std::vector<float> pooled;
    if (sdxl_encoder_) pooled = per_slot(travelled(pooled_from_, pooled_to_), pooled_uncond_);
    else pooled.assign(size_t(plan_.batch) * model_.config.text_embeds_dim(), 0.0f);  // a bare U-Net config: zeros
    backend_->write(plan_.text_embeds, pooled.data(), pooled.size());
    const std::vector<float> ids = sdxl_time_ids(width_, height_);
    const std::vector<float> time_ids = per_slot(ids, ids);
    backend_->write(plan_.time_ids, time_ids.data(), time_ids.size());
  }
  context_t_ = t;
  backend_->run_setup();
}

void Engine::step(const std::vector<float>* image) {
  step_from(image ? image->data() : nullptr, image ? image->size() : 0, Backend::InputFormat::F32);
}

void Engine::step(const std::vector<uint8_t>& rgb8) { step_from(rgb8.data(), rgb8.size(), Backend::InputFormat::Rgb8); }

void Engine::step_from(const void* image, size_t values, Backend::InputFormat format) {
  const bool context_kept = travel_position() == context_t_;  // else the frame must run (a new prompt, travel)
  write_context(travel_position());
  const int slot = int(stepped() % plan_.group);
  gather_source(image, values, format, slot);
  if (slot + 1 == plan_.group) {
    const int64_t call = stepped() / plan_.group;
    const bool ran = run_call(call, context_kept);
    if (ran) make_noise(call + 1);  // while the GPU runs this call
    if (source_in_place()) backend_->wait_inputs_read();  // the caller may write source_frame() again
    if (!ran) return;  // see Engine::skipped()
  }
  ++frame_;
  image_current_ = false;
}

std::vector<uint8_t>& Engine::source_frame() {
  const size_t bytes = size_t(width_) * height_ * model_.image_channels();
  if (source_frame_.capacity() < bytes) {
    source_pin_.release();
    source_frame_.reserve(bytes);
  }
  source_pin_.keep(*backend_, source_frame_);
  return source_frame_;
}

// img2img: the frame's source, checked; a stream batch gathers its group's sources for one write.
void Engine::gather_source(const void* image, size_t values, Backend::InputFormat format, int slot) {
  if (!img2img_) return;
  const size_t pixels = size_t(width_) * height_ * model_.image_channels();
  if (!image || values != pixels) fail("img2img frame: expected ", pixels, " values, got ", image ? values : 0);
  if (slot > 0 && format != source_format_)
    fail("img2img frame: a stream batch's frames must all be 8-bit or all float images");
  source_format_ = format;
  if (plan_.group == 1) {
    source_ = image;
    return;
  }
  const size_t bytes = pixels * source_value_bytes();
  sources_.resize(bytes * plan_.group);
  std::memcpy(sources_.data() + slot * bytes, image, bytes);
}

// One call of the plan, the call-th since it started, or none when the similarity filter skips its frame
// (false; one frame per call then). With a stream batch, the calls before the first group reaches the last
// slot present nothing (their `first` flag set, so that they leave no history behind them).
bool Engine::run_call(int64_t call, bool context_kept) {
  write_inputs(call);
  if (similarity_.skip(*backend_, frame_, context_kept && !first_frame_)) return false;
  const bool output = call >= plan_.slots() - 1;
  if (output && !kept_history_.empty()) {
    backend_->write(plan_.prev, kept_history_.data(), kept_history_.size());
    kept_history_.clear();
  }
  DenoiseBlendOp& blend = plan_.present_op();
  const bool first = first_frame_ || !output;
  if (blend.p.first != first) {
    blend.p.first = first;
    backend_->ops_changed();
  }
  // The CPU backend throws Cancelled here when cancellation is requested mid-frame (backends/cancel.h):
  // then nothing below runs, so the engine stays as before this step and the next step() renders the
  // same frame again. (The CUDA backend does not look; callers check between frames.) A stream batch's
  // call moves its frames from slot to slot in place: cancelled half way, its frames in flight are lost, and
  // the pipeline starts again from the group being gathered, with no history.
  try {
    run_frame();
  } catch (const Cancelled&) {
    if (plan_.pipelined()) {
      plan_start_ = frame_ - (plan_.group - 1);
      first_frame_ = true;
    }
    throw;
  }
  if (output) first_frame_ = false;
  return true;
}

// The feature cache's refresh (FrameSettings::cache_refresh): a full frame every cache_refresh frames, at the
// first frame, after a re-plan, when asked (request_refresh) and when the source moved away from the last full
// frame's (cache_similarity); the cached frame between. A full frame cancelled partway may leave the cache half
// written: the request stays, and the step that renders it again is full again.
void Engine::run_frame() {
  bool full = plan_.graph.cached_frame.empty() || first_frame_ || refresh_requested_ ||
              frames_since_refresh_ >= settings_.cache_refresh;
  if (!full && cache_source_.active() && cache_source_.similarity(*backend_) < settings_.cache_similarity) {
    full = true;
    ++source_refreshes_;
  }
  if (full) {
    refresh_requested_ = true;
    if (cache_source_.active()) cache_source_.keep(*backend_);
  }
  backend_->run_frame(full ? FrameOps::Full : FrameOps::Cached);
  frames_since_refresh_ = full ? 1 : frames_since_refresh_ + 1;
  if (full) refresh_requested_ = false, ++full_frames_;
}

// A call's noise, the same for every model: the noise walk at the sample's size (the sampler's start) for each
// frame that enters, and each noise-adding step's own walk (seeded apart, so that consecutive frames stay close at
// every step) for the frames at that step. Frames are numbered from the engine's start (the noise walk's index),
// so a call's noise is known before its source: step() makes the next call's while the GPU runs this one.
std::vector<int64_t> Engine::noise_key(int64_t call) const {
  std::vector<int64_t> key = {plan_start_ + call * plan_.group, plan_start_, int64_t(settings_.seed),
                              settings_.noise_period, plan_.group, int64_t(noise_count()), plan_.pipelined()};
  key.insert(key.end(), plan_.noise_steps.begin(), plan_.noise_steps.end());
  return key;
}

void Engine::make_noise(int64_t call) {
  const size_t count = noise_count();
  const int group = plan_.group;
  const int64_t entering = plan_start_ + call * group;  // the first frame of the group that enters
  CallNoise& n = noise_ahead_;
  n.sample.resize(count * group);
  for (int i = 0; i < group; ++i)
    noise_walk(settings_.seed, entering + i, settings_.noise_period, n.sample.data() + i * count, count);
  n.steps.assign(count * group * plan_.noise_steps.size(), 0.0f);  // zeros for slots no frame has reached yet
  for (size_t j = 0; j < plan_.noise_steps.size(); ++j) {
    const int step = plan_.noise_steps[j];
    const int64_t at_step = entering - (plan_.pipelined() ? int64_t(step) * group : 0);
    for (int i = 0; i < group; ++i)
      if (at_step + i >= plan_start_)
        noise_walk(settings_.seed + 1 + uint64_t(step), at_step + i, settings_.noise_period,
                   n.steps.data() + (j * group + i) * count, count);
  }
  n.key = noise_key(call);
}

// A call's host inputs: its noise and the source images for img2img (the sampler's start mixes or encodes them
// on the device).
void Engine::write_inputs(int64_t call) {
  using Format = Backend::InputFormat;
  if (noise_ahead_.key != noise_key(call)) make_noise(call);
  const CallNoise& n = noise_ahead_;
  std::memcpy(backend_->input_buffer(plan_.sample, n.sample.size(), Format::F32), n.sample.data(),
              n.sample.size() * sizeof(float));
  if (!n.steps.empty())
    std::memcpy(backend_->input_buffer(plan_.noise, n.steps.size(), Format::F32), n.steps.data(),
                n.steps.size() * sizeof(float));
  for (size_t k = 0; k < plan_.control_images.size(); ++k) {
    if (!plan_.control_images[k]) continue;
    if (k >= control_images_.size() || control_images_[k].empty())
      fail("ControlNet ", k + 1, " (", model_.controlnets[k].source, "): no control image was given");
    std::vector<float>& c = control_images_[k];
    // An image given before a plan of a larger group: its last image for the places after it.
    const size_t values = size_t(width_) * height_ * model_.controlnets[k].config.conditioning_channels;
    if (c.size() < values * size_t(plan_.group)) {
      const std::vector<float> last(c.end() - ptrdiff_t(values), c.end());
      while (c.size() < values * size_t(plan_.group)) c.insert(c.end(), last.begin(), last.end());
    }
    c.resize(values * size_t(plan_.group));
    std::memcpy(backend_->input_buffer(plan_.control_images[k], c.size(), Format::F32), c.data(), c.size() * sizeof(float));
  }
  if (source_in_place()) {
    backend_->input_from(plan_.image, source_, source_frame_.size(), source_format_);
  } else if (img2img_) {
    const int group = plan_.group;
    const size_t values = size_t(width_) * height_ * model_.image_channels() * group;
    void* image = backend_->input_buffer(plan_.image, values, source_format_);
    std::memcpy(image, group == 1 ? source_ : sources_.data(), values * source_value_bytes());
  }
  backend_->commit_inputs();
}

void Engine::restart() {
  frame_ = 0;
  plan_start_ = 0;
  kept_history_.clear();
  first_frame_ = true;
  image_current_ = false;
}

std::string Engine::nonfinite_message(int64_t frame) const {
  const std::string prefix = cat("frame ", frame, " is not finite (NaN or Inf in the model's output): ");
  if (backend_->is_cuda() && model_.vae_overflows_fp16()) return prefix + fp16_vae_advice();
  return cat(prefix, "lower --guidance or a --lora scale, or the checkpoint holds values too large for ",
             backend_->is_cuda() ? "fp16" : "fp32");
}

// The last frame's pixels and flag to the host, once per frame. A frame that is not finite leaves no history
// to blend with: the next step starts over.
void Engine::read_image() {
  if (image_current_) return;
  const size_t bytes = pixel_bytes();
  image_.width = width_;
  image_.height = height_;
  const size_t read = bytes + sizeof(int32_t);  // the flag follows the pixels (add_frame_output)
  if (image_.pixels.capacity() < read) image_pin_.release();
  image_.pixels.resize(read);
  image_pin_.keep(*backend_, image_.pixels);
  backend_->read(output_rgba(), image_.pixels.data(), read);
  int32_t flag = 0;
  std::memcpy(&flag, image_.pixels.data() + bytes, sizeof flag);
  image_.pixels.resize(bytes);
  image_finite_ = flag == 0;
  if (!image_finite_) first_frame_ = true;
  image_frame_ = frame_ - 1 - plan_.latency();
  image_current_ = true;
}

const ImageRgba8& Engine::image() {
  if (!image_current_ && !has_output()) fail("engine: no frame rendered yet");
  read_image();
  if (!image_finite_) throw NonFiniteFrame(nonfinite_message(image_frame_));
  return image_;
}

void Engine::queue_image(bool pixels) {
  if (!has_output()) fail("engine: no frame rendered yet");
  const Ref rgba = output_rgba();
  if (pixels) backend_->begin_readback(rgba, pixel_bytes() + sizeof(int32_t));
  else backend_->begin_readback(rgba.at(int64_t(pixel_bytes())), sizeof(int32_t));
  queued_.push_back({frame_ - 1 - plan_.latency(), pixels});
}

const ImageRgba8& Engine::take_image() {
  if (queued_.empty()) fail("engine: no frame queued");
  const Queued taken = queued_.front();
  queued_.pop_front();
  const uint8_t* bytes = backend_->finish_readback();
  const size_t pixels = taken.pixels ? pixel_bytes() : 0;
  int32_t flag = 0;
  std::memcpy(&flag, bytes + pixels, sizeof flag);
  if (flag != 0) {
    // The frames queued after it blended with it: dropped, and the next step starts over.
    for (; !queued_.empty(); queued_.pop_front()) backend_->finish_readback();
    first_frame_ = true;
    throw NonFiniteFrame(nonfinite_message(taken.frame));
  }
  taken_.width = width_;
  taken_.height = height_;
  taken_.pixels.assign(bytes, bytes + pixels);
  return taken_;
}

int Engine::class_id(const std::string& v) const {
  const ModelConfig& c = model_.config;
  if (c.num_class_embeds == 0) fail("--class ", v, ": this model has no classes");
  if (v.empty()) return 0;
  for (size_t i = 0; i < c.class_names.size(); ++i)
    if (c.class_names[i] == v) return int(i);
  char* end = nullptr;
  const long id = std::strtol(v.c_str(), &end, 10);
  if (end && *end == '\0' && id >= 0 && id < c.num_class_embeds - 1) return int(id);
  fail("--class ", v, ": expected a class name (", class_names_text(c), ") or a number in [0, ", c.num_class_embeds - 1,
       ")");
}

FrameSettings frame_settings(const GenerationOptions& o, const Engine& engine) {
  FrameSettings s = o.frame;
  if (engine.config().num_class_embeds > 0) s.class_id = engine.class_id(o.class_name);
  else if (!o.class_name.empty()) fail("--class ", o.class_name, ": this model has no classes");
  if (s.sampler && !engine.model().latent())
    fail("--sampler ", sampler_name(*s.sampler), ": ", engine.model().source,
         " is a pixel-space model with a sampler of its own (rectified flow); --sampler is for SD models");
  return s;
}

}  // namespace rtvd
