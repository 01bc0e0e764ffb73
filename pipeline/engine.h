// The frame loop's engine: a model on a backend, a plan for the current settings, and one call per
// frame. Headless rendering and the GUI drive the same Engine (instant-ngp's `while (frame())`).
#pragma once
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "pipeline/backends/backend.h"
#include "pipeline/device.h"
#include "pipeline/frame_plan.h"
#include "pipeline/io/image.h"
#include "pipeline/io/source.h"
#include "pipeline/laps.h"
#include "pipeline/models/model.h"
#include "pipeline/prompt_encoder.h"
#include "pipeline/prompt_settings.h"
#include "pipeline/sdxl_prompt_encoder.h"
#include "pipeline/similarity_filter.h"

namespace rtvd {

// A frame that holds NaN or Inf (its denoise_blend's flag, read with the frame): the one line names the frame
// and the likely causes. The engine has dropped the frames queued after it and its blend history, so the
// next step starts over.
struct NonFiniteFrame : Error {
  using Error::Error;
};

// Where and what the engine runs; the CLI reads its flags straight into these (app/cli.h).
struct EngineOptions {
  ModelOptions model;                           // --model --vae --lora --prediction-type --timestep-spacing --config
  DeviceKind device = DeviceKind::Auto;         // --device
  int threads = 0;                              // --threads: CPU threads, 0 = follow the load (cpu_threads.h)
  KernelFamily kernels = KernelFamily::Auto;    // --kernels: which CUDA kernels the heavy ops choose from
  int width = 0, height = 0;                    // --size; 0: the model's sample_size
  int clip_skip = 0;                            // --clip-skip: text encoder layers skipped from the end
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);

  const ModelConfig& config() const { return model_.config; }
  const Model& model() const { return model_; }
  Backend& backend() { return *backend_; }
  bool on_gpu() const { return backend_->is_cuda(); }  // fp16 activations
  const FramePlan& plan() const { return plan_; }
  int width() const { return width_; }
  int height() const { return height_; }
  std::string device_note() const { return device_note_; }  // why this backend (e.g. "no CUDA device")
  // How long making the engine took, part by part: "model files" (opened and checked; a large file's pages go
  // on coming in on a thread of their own, waited for by what reads them), "backend", "text encoder" (its
  // backend and weights; models with one), "weights" (the first plan: every weight built and uploaded).
  const Laps& startup() const { return startup_; }

  // New settings take effect at the next frame; re-plans (no per-frame cost) only when they changed, and not for
  // ControlNets' Canny thresholds and scales alone (an input of the plan and params of its ops, written in place).
  void configure(const FrameSettings& settings, bool img2img);
  const FrameSettings& settings() const { return settings_; }
  // With the feature cache (FrameSettings::cache_refresh): the next step runs a full frame, which refreshes
  // the cached deep features, whatever the period says (for a source that changed too much for them).
  void request_refresh() { refresh_requested_ = true; }
  // Frames since the engine was made that ran the full U-Net (every frame without the cache), and of those the
  // ones that did because their source had moved away from the last full frame's (cache_similarity).
  int64_t full_frames() const { return full_frames_; }
  int64_t source_refreshes() const { return source_refreshes_; }
  // New prompts take effect at the next frame, with no re-plan: the text encoder runs for a prompt it has not
  // seen (between frames), then only the context is rewritten. Error naming --prompt for a model without a
  // text encoder. notices: one line per prompt that was cut to the token limit.
  void set_prompts(const PromptSettings& prompts, std::vector<std::string>* notices = nullptr);
  const PromptSettings& prompts() const { return prompts_; }
  bool has_text_encoder() const { return prompt_encoder_ || sdxl_encoder_; }

  // The control image of ControlNet `net` (ControlPreprocessor::Image): (height, width, its conditioning
  // channels) in [-1, 1], as a FrameSource gives it, sent with every frame from now on. Error naming the net for
  // another size.
  void set_control_image(size_t net, const std::vector<float>& rgb);
  // The control image ControlNet `net` read in the last frame (the first of a stream batch's group): (height,
  // width, its conditioning channels) in [0, 1], into `image`. Waits for the frame (not for the frame loop: a view's
  // few reads a second).
  void read_control_image(size_t net, std::vector<float>& image);

  // One frame in, left on the backend. image: (height, width, model().image_channels()) in [-1, 1] for img2img
  // (RGB, encoded by the autoencoder, for models with one), or null for the noise walk. With a stream batch
  // (FrameSettings::stream_batch = K) the frame enters the pipeline and the frame K - 1 steps before it comes out
  // (frame_plan.h); until K frames have stepped since the plan started, none has (has_output()).
  void step(const std::vector<float>* image);
  // The same with the source as 8-bit RGB (height, width, 3), as the frame sources decode it (FrameSource::next):
  // a quarter of the bytes to send, each byte b becoming b / 127.5 - 1 on the device, the float path's value.
  void step(const std::vector<uint8_t>& rgb8);
  // A buffer for that 8-bit source frame, for FrameSource::next to decode into: step(source_frame()) sends it to
  // the device from where it is (page-locked on the GPU), with no copy on the host, one frame per call (a
  // stream batch gathers its group's frames by copying them). It holds a frame's bytes without growing, so a
  // source that fills it in place keeps it where it is. step() returns once the device has read it.
  std::vector<uint8_t>& source_frame();
  // Whether a frame has come out since the plan started: latency() steps after the first.
  bool has_output() const { return stepped() > plan_.latency(); }
  int latency() const { return plan_.latency(); }
  // The frame that came out at the last step (frame_index() - 1 - latency()) on the host (read back at the
  // first call after a step); NonFiniteFrame when it is not finite.
  const ImageRgba8& image();
  // That frame's RGBA8 pixels on the GPU (rows of width * 4 bytes) and the stream that wrote them; both null
  // on the CPU backend.
  Backend::DeviceView device_image() { return backend_->device_view(output_rgba()); }
  // Asynchronous readback, for consumers that can take frames a step late (the recorder): queue_image()
  // after step() starts copying that frame to the host while the next frame computes, its pixels and its
  // non-finite flag, or with pixels false the flag alone (a display that shows the frame from the GPU
  // learns a frame late that it was not finite); take_image() returns the oldest queued frame (no pixels
  // where only its flag was copied), waiting for its copy if needed, or throws NonFiniteFrame. At most two
  // are queued.
  void queue_image(bool pixels = true);
  const ImageRgba8& take_image();
  int queued_images() const { return int(queued_.size()); }
  // step() then image().
  const ImageRgba8& render(const std::vector<float>* image) {
    step(image);
    return this->image();
  }
  const ImageRgba8& render(const std::vector<uint8_t>& rgb8) {
    step(rgb8);
    return image();
  }
  int64_t frame_index() const { return frame_; }  // frames stepped since the engine was made or restarted
  // The similarity filter (FrameSettings::skip_similar): whether the last step() skipped its frame, and how
  // many steps did since the engine was made. A skipped step leaves the engine as it was: image(),
  // queue_image(), take_image() and device_image() give the previous frame again, and the frame index (the
  // noise walk's and prompt travel's position) stays, so the next frame rendered is the one the engine would
  // render next had the skipped sources never come: the frames rendered are those an engine without the
  // filter renders from the rendered sources alone.
  bool skipped() const { return similarity_.skipped(); }
  int64_t skipped_frames() const { return similarity_.skipped_frames(); }
  // Starts the sequence over: the next step is frame 0 of the noise walk, with no blend history (and, with a
  // stream batch, no frame in flight).
  void restart();

  // Resolves a class given as a name or a number to its id; Error naming the flag value if unknown.
  int class_id(const std::string& name_or_id) const;

 private:
  Laps startup_;  // made before model_, whose load is the first part
  std::future<void> device_start_;  // the device's slow start, made while model_ loads (start_device)
  Model model_;
  std::unique_ptr<Backend> backend_;
  std::string device_note_;
  int width_ = 0, height_ = 0;
  FrameSettings settings_;
  std::unique_ptr<PromptEncoder> prompt_encoder_;  // null for models without a text encoder, and for SDXL's...
  std::unique_ptr<SdxlPromptEncoder> sdxl_encoder_;  // ...two, which SDXL models have instead
  PromptSettings prompts_;
  std::vector<float> cond_from_, cond_to_, uncond_;  // (tokens, width) each
  std::vector<float> pooled_from_, pooled_to_, pooled_uncond_;  // SDXL: (pooled width) each, beside those
  float context_t_ = -1;  // travel position of the context on the backend; -1 = not written
  bool img2img_ = false, configured_ = false, first_frame_ = true, image_current_ = false, image_finite_ = false;
  bool refresh_requested_ = true;  // the next frame is full, whatever cache_refresh says
  int frames_since_refresh_ = 0;   // frames stepped since the last full frame, that one included
  int64_t full_frames_ = 0, source_refreshes_ = 0;
  SourceMonitor cache_source_;     // the last full frame's source (FrameSettings::cache_similarity)
  FramePlan plan_;
  SimilarityFilter similarity_;
  int64_t frame_ = 0;
  int64_t plan_start_ = 0;  // frame_ when the plan's pipeline started (configure, restart): no frame in flight
  const void* source_ = nullptr;  // the frame's source (img2img, one frame per call), in source_format_
  Backend::InputFormat source_format_ = Backend::InputFormat::F32;
  std::vector<uint8_t> sources_;  // a stream batch's group of source images, gathered until the group is whole
  std::vector<uint8_t> source_frame_;
  Backend::VectorPin source_pin_;  // source_frame_'s buffer page-locked (after it: freed first)
  std::vector<std::vector<float>> control_images_;  // per ControlNet: set_control_image's, or empty
  std::vector<float> kept_history_;  // a stream batch's blend history kept across a re-plan, written back when
                                     // its first frame comes out (the calls before it present nothing)
  ImageRgba8 image_, taken_;
  Backend::VectorPin image_pin_;  // image_.pixels' buffer page-locked (after image_: freed first)
  int64_t image_frame_ = 0;  // image_'s frame
  struct Queued {
    int64_t frame;
    bool pixels;
  };
  std::deque<Queued> queued_;  // readbacks begun and not yet taken, oldest first

  void check_memory(const SamplerPlan& sampler, const FrameSettings& s) const;
  void write_canny_thresholds();
  void write_controlnet_scales();
  void read_image();
  size_t pixel_bytes() const { return size_t(width_) * height_ * 4; }
  std::string nonfinite_message(int64_t frame) const;
  int64_t stepped() const { return frame_ - plan_start_; }
  int output_slot() const { return int((stepped() - 1 - plan_.latency()) % plan_.group); }
  Ref output_rgba() const { return plan_.rgba.at(output_slot() * plan_.frame_bytes()); }
  void step_from(const void* image, size_t values, Backend::InputFormat format);
  void gather_source(const void* image, size_t values, Backend::InputFormat format, int slot);
  size_t source_value_bytes() const { return source_format_ == Backend::InputFormat::Rgb8 ? 1 : sizeof(float); }
  // Whether the call's source is sent from source_frame_ itself (write_inputs), one frame per call.
  bool source_in_place() const { return img2img_ && plan_.group == 1 && source_ == source_frame_.data(); }
  bool run_call(int64_t call, bool context_kept);
  void write_inputs(int64_t call);
  // A call's noise (write_inputs) and what it was made for: the call's frame numbers and the plan's shape.
  struct CallNoise {
    std::vector<int64_t> key;
    std::vector<float> sample, steps;  // (group, noise_count()); (noise steps, group, noise_count())
  };
  CallNoise noise_ahead_;
  size_t noise_count() const {
    return size_t(plan_.latent_width) * plan_.latent_height * model_.config.in_channels;
  }
  std::vector<int64_t> noise_key(int64_t call) const;
  void make_noise(int64_t call);
  void run_frame();
  float travel_position() const;
  void write_context(float t);
  void make_text_encoders(const EngineOptions& o);
  void embed_prompts(const PromptSettings& p, std::vector<std::string>* notices);
};

// What to generate: the engine's options and frame settings plus what the model resolves (its class by name)
// and where images come from. Render and the GUI read their generation flags straight into it.
struct GenerationOptions {
  EngineOptions engine;          // --model --size --device --threads --kernels
  FrameSettings frame;           // --seed --steps --guidance --strength --blend; class_id: see frame_settings()
  PromptSettings prompts;        // --prompt --negative-prompt --prompt-to --travel-frames
  std::string class_name;        // --class, a name or an id; "" = the model's first class
  SourceSpec source;             // --source (pipeline/io/source.h); its files are checked when opened
};

// o.frame with --class resolved against the loaded model; throws rtvd::Error naming --class for a class the
// model does not have.
FrameSettings frame_settings(const GenerationOptions& o, const Engine& engine);

}  // namespace rtvd
