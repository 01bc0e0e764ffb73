#include "app/gui/app.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>

#include "app/common/startup_notes.h"
#include "app/common/control_sources.h"
#include "app/common/stop_signals.h"
#include "app/gui/control_views.h"
#include "app/gui/controls.h"
#include "app/gui/frame_stats.h"
#include "app/gui/frame_upload.h"
#include "app/gui/implementations.h"
#include "app/gui/layout.h"
#include "app/gui/overlay.h"
#include "app/gui/presenter.h"
#include "app/gui/recording.h"
#include "app/gui/shortcuts.h"
#include "app/gui/window.h"
#include "base/error.h"
#include "pipeline/backends/cancel.h"
#include "pipeline/io/png.h"
#include "pipeline/io/recorder.h"
#include "pipeline/io/source.h"

namespace rtvd::gui {

namespace {

using Clock = std::chrono::steady_clock;

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &local);
  return text;
}

// A new name per recording, so a second one never overwrites the first; PNG frames without OpenCV.
std::string default_record_path() {
  return cat("out/rtvd-", timestamp(), video_recording_available() ? ".mp4" : "/");
}

std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / (1 << 20));
  return text;
}

// Also applies the prompts: a bad --prompt fails here, before a window opens.
ControlsState initial_state(const GuiOptions& o, Engine& engine) {
  ControlsState s;
  s.settings = frame_settings(o, engine);
  for (const ControlNetSettings& c : s.settings.controlnets) s.nets.push_back({.on = true, .scale = c.scale});
  s.prompts = o.prompts;
  std::vector<std::string> notices;
  engine.set_prompts(o.prompts, &notices);
  for (const std::string& n : notices) std::fprintf(stderr, "%s\n", n.c_str());
  s.source = o.source;
  s.record_path = o.record.empty() ? default_record_path() : o.record;
  s.budget_ms = float(o.budget_ms);
  s.linear = o.linear_filter;
  return s;
}

// Window coordinates (ImGui's) to framebuffer pixels (GL's).
Rect to_pixels(const Rect& r, const Window::Size& window, const Window::Size& fb) {
  const double sx = window.w ? double(fb.w) / window.w : 1, sy = window.h ? double(fb.h) / window.h : 1;
  return {int(std::lround(r.x * sx)), int(std::lround(r.y * sy)), int(std::lround(r.w * sx)),
          int(std::lround(r.h * sy))};
}

class App {
 public:
  explicit App(const GuiOptions& o);
  int run();

 private:
  bool frame();
  void handle(const Requests& r);
  void generate(bool restart);
  bool read_source_image();
  void switch_to_noise(const std::string& why);
  void upload();
  void read_back();
  void take_frame();
  void report(const NonFiniteFrame& e);
  void toggle_recording();
  void stop_recording();
  void save_screenshot(const std::string& path);
  void notify(const std::string& text, bool error = true);
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  std::string recording_status() const;
  OverlayInfo overlay_info();

  const GuiOptions options_;
  const Clock::time_point start_ = Clock::now();
  Engine engine_;
  const int class_count_ = int(engine_.config().class_names.size());
  std::unique_ptr<FrameSource> source_;
  std::vector<std::string> control_notes_;
  ControlSources controls_;  // the ControlNets' own control images, read in step with the frames
  ControlsState state_;
  Window window_;
  Presenter presenter_;
  ControlViews control_views_;  // after the window: its textures need the GL context
  std::vector<std::string> controlnet_names_;  // each net's folder or file name, for the panel
  std::unique_ptr<FrameUpload> upload_;
  bool interop_ = false;
  std::unique_ptr<Recording> recording_;
  std::string default_record_path_;
  FrameStats stats_;
  RollingProfile profile_;
  std::map<std::string, std::string> implementations_;
  std::vector<Message> messages_;  // the last few, newest last
  FrameSettings applied_;
  std::optional<std::pair<FrameSettings, bool>> rejected_;  // settings and img2img the engine refused
  bool applied_img2img_ = false, configured_ = false, profiling_ = false;
  int generated_ = 0, screenshots_ = 0;
  bool generated_last_iteration_ = false;
  bool nonfinite_reported_ = false;  // since the last frame that was finite
  double last_frame_s_ = 0;
  double upload_host_ms_ = 0;  // display path: host time of the uploads, for the exit line
  int uploads_ = 0;
};

// Engine, source and settings come first, so a bad model, source or class fails before a window opens.
App::App(const GuiOptions& o)
    : options_(o),
      engine_(o.engine),
      source_(open_source(o.source)),
      controls_(o.controlnets, engine_.width(), engine_.height(), 0, control_notes_),
      state_(initial_state(o, engine_)),
      window_(o.window.width, o.window.height, "rtvd", o.vsync),
      presenter_(engine_.width(), engine_.height()),
      control_views_(int(o.engine.model.controlnets.size()), engine_.width(), engine_.height()),
      default_record_path_(state_.record_path) {
  print_startup_notes(engine_, state_.settings);
  for (const std::string& n : control_notes_) std::fprintf(stderr, "%s\n", n.c_str());
  for (const std::string& net : o.engine.model.controlnets) {  // a folder's name, or a file's
    const std::filesystem::path path(net);
    controlnet_names_.push_back((path.filename().empty() ? path.parent_path() : path).filename().string());
  }
  std::string why_not;
  upload_ = make_interop_upload(presenter_, engine_, &why_not);
  interop_ = upload_ != nullptr;
  if (!interop_) {
    if (engine_.backend().is_cuda())
      notify(cat("CUDA-GL interop unavailable (", why_not, "): frames go through the host"));
    upload_ = make_host_upload(presenter_);
  }
  if (!o.record.empty())  // asked for on the command line: a bad path is an error, as in rtvd render
    recording_ = std::make_unique<Recording>(open_recorder(o.record, engine_.width(), engine_.height(), o.fps));
}

int App::run() {
  // Ctrl-C in the terminal, SIGTERM (a session ending, `timeout`) and SIGHUP (the terminal closed) end the
  // loop like Esc, so a recording is finalised and stays playable.
  const StopSignals stop_signals;
  while (!window_.should_close() && !cancel_requested() && frame()) {
  }
  stop_recording();

  char ops[160] = "";
  if (stats_.mean_gpu_ms() > 0)
    std::snprintf(ops, sizeof ops, ", %s %s ms per frame (profiled)", engine_.backend().is_cuda() ? "GPU" : "CPU",
                  three_digits(stats_.mean_gpu_ms()).c_str());
  const FrameRate run = stats_.run();  // the overlay's definition, over the whole run
  char upload[96] = "";
  if (uploads_ > 0)
    std::snprintf(upload, sizeof upload, " (%.3f ms host%s per frame)", upload_host_ms_ / uploads_,
                  upload_->gpu_ms() > 0 ? cat(", ", upload_->gpu_ms(), " ms GPU").c_str() : "");
  std::fprintf(stderr, "rtvd gui: %d frames, display path: %s%s, %s frames/s, %s ms per frame (mean interval)%s; GL: %s\n",
               generated_, upload_->name().c_str(), upload, three_digits(run.frames_per_s).c_str(),
               three_digits(run.ms).c_str(), ops, window_.renderer().c_str());
  const int signo = StopSignals::received();
  return signo ? 128 + signo : 0;
}

// One pass of the loop: input, widgets, a frame unless paused, drawing. False when the run is over.
bool App::frame() {
  if (window_.minimised()) {  // nothing to draw: sleep until the window comes back
    window_.wait_events(0.5);
    return true;
  }
  if (state_.paused) window_.wait_events(1.0 / 30);  // idle, but still answering the mouse and keys
  else window_.poll_events();

  window_.begin_frame();
  Requests requests;
  const std::vector<Window::KeyPress> keys = window_.take_key_presses();
  if (!window_.typing())
    for (Command c : commands_of(keys)) apply_command(c, state_, requests, class_count_);
  const Window::Size size = window_.size(), fb = window_.framebuffer_size();
  const Layout layout =
      layout_window(size.w, size.h, state_.show_controls, state_.show_overlay, engine_.width(), engine_.height());
  ControlsInfo info;
  info.class_names = &engine_.config().class_names;
  info.has_text_encoder = engine_.has_text_encoder();
  if (engine_.model().latent()) info.native_sampler = sampler_name(engine_.model().scheduler->native_sampler());
  info.source = source_->describe();
  control_views_.update(engine_, seconds());
  info.control_views = control_views_.textures();
  info.view_aspect = float(engine_.height()) / float(engine_.width());
  info.controlnets = controlnet_names_;
  info.recording = recording_ != nullptr;
  info.recording_status = recording_status();
  info.messages = &messages_;
  draw_controls(layout.controls, state_, info, requests);
  handle(requests);

  const bool generate_now = !state_.paused || requests.step || requests.reset;
  if (generate_now) generate(requests.reset);
  generated_last_iteration_ = generate_now;

  draw_overlay(layout.overlay, overlay_info(), state_);
  draw_view_badges(layout.view, recording_status(), state_.paused);
  draw_help(&state_.show_help);
  presenter_.draw(to_pixels(layout.frame, size, fb), fb.w, fb.h, state_.linear);
  window_.end_frame();

  if (requests.screenshot) {
    const std::string path = cat("out/rtvd-", timestamp(), "-", ++screenshots_, ".png");
    try {
      save_screenshot(path);
      notify("screenshot: " + path, false);
    } catch (const std::exception& e) {
      notify(cat("screenshot ", path, ": ", e.what()));
    }
  }
  const bool done = options_.frames && generated_ >= *options_.frames;
  if (done && !options_.screenshot.empty()) save_screenshot(options_.screenshot);
  window_.swap();
  return !done && !requests.quit;
}

void App::handle(const Requests& r) {
  if (r.apply_prompts) {
    // The text encoder runs here, between frames, once per new text (PromptEncoder caches the rest).
    std::vector<std::string> notices;
    try {
      engine_.set_prompts(state_.prompts, &notices);
    } catch (const Error& e) {
      notify(e.what());
    }
    for (const std::string& n : notices) notify(n, false);
  }
  if (r.open_source) {
    try {
      source_ = open_source(state_.source);
    } catch (const Error& e) {
      notify(e.what());
    }
  }
  if (r.record) toggle_recording();
}

void App::generate(bool restart) {
  if (restart) {
    engine_.restart();
    source_->rewind();
  }
  const bool has_input = source_->has_images() && read_source_image();
  const bool img2img = source_->has_images();
  const bool refused = rejected_ && rejected_->first == state_.settings && rejected_->second == img2img;
  const bool replan = !configured_ || !(state_.settings == applied_) || img2img != applied_img2img_;
  if (replan && !refused) {
    try {
      engine_.configure(state_.settings, img2img);
    } catch (const Error& e) {
      if (!configured_) throw;  // the command line's settings: rtvd gui reports them and exits
      notify(e.what());
      rejected_ = {state_.settings, img2img};  // not asked again until something changes
      state_.settings = applied_;               // the engine still runs these
      return;
    }
    rejected_.reset();
    applied_ = state_.settings;
    applied_img2img_ = img2img;
    configured_ = true;
    profile_.reset();
  }
  if (state_.profiling != profiling_) {
    engine_.backend().set_profiling(state_.profiling);
    profiling_ = state_.profiling;
    profile_.reset();
  }
  try {
    controls_.next(engine_);
  } catch (const Error& e) {  // a webcam unplugged: the net keeps its last image
    notify(e.what());
  }
  try {
    if (has_input) engine_.step(engine_.source_frame());
    else engine_.step(nullptr);
  } catch (const Cancelled&) {
    return;  // a stop signal: the loop ends after this pass and the frame in progress is dropped
  }
  try {
    if (engine_.has_output()) {  // a stream batch's first frames are in flight: the window keeps the last one
      upload();
      read_back();
    }
  } catch (const NonFiniteFrame& e) {
    report(e);
  }
  const std::vector<Op>& ops = engine_.plan().graph.frame;
  if (profiling_) {
    profile_.add(ops, engine_.backend().frame_op_ms());
    if (const float ms = engine_.backend().frame_gpu_ms(); ms > 0) stats_.add_gpu_ms(ms);
  }
  // Per-op implementations can be decided during the first frames of a plan (autotuning): asked again
  // after each plan's first frame and then now and then.
  if (replan || generated_ % 60 == 1) implementations_ = implementations_by_type(ops, engine_.backend());

  const double now = seconds();
  stats_.add_frame(now, generated_last_iteration_ && generated_ > 0 ? (now - last_frame_s_) * 1e3 : -1.0);
  last_frame_s_ = now;
  ++generated_;
}

// The source's next frame into the engine's source_frame(). A video loops; a source that fails (a webcam unplugged, a file
// that stops decoding) is replaced by the noise walk, and generation goes on.
bool App::read_source_image() {
  try {
    if (source_->next(engine_.width(), engine_.height(), engine_.source_frame())) return true;
    source_->rewind();
    if (source_->next(engine_.width(), engine_.height(), engine_.source_frame())) return true;
    switch_to_noise(source_->describe() + " gives no frames");
  } catch (const Error& e) {
    switch_to_noise(e.what());
  }
  return false;
}

void App::switch_to_noise(const std::string& why) {
  notify(why + "; switched to the noise walk");
  state_.source.kind = SourceKind::Noise;
  source_ = open_source(state_.source);
}

// Interop that fails mid-run (the driver lost the texture, say) falls back to the host for good.
void App::upload() {
  const auto start = std::chrono::steady_clock::now();
  try {
    upload_->upload(engine_);
    upload_host_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++uploads_;
  } catch (const Error& e) {
    if (!interop_) throw;
    notify(cat("CUDA-GL interop failed (", e.what(), "): switched to the host upload"));
    upload_ = make_host_upload(presenter_);
    interop_ = false;
    upload_->upload(engine_);
  }
}

// Every frame goes to the host while the next one computes and is taken a frame late, so the loop does not
// wait for the GPU: its pixels while recording, else its non-finite flag alone (the host upload has read the
// frame, but interop shows it without the host).
void App::read_back() {
  engine_.queue_image(recording_ != nullptr);
  if (engine_.queued_images() == 2) take_frame();
  if (recording_ && !recording_->error().empty()) stop_recording();
}

// The oldest queued frame, recorded while recording (when its pixels were read back); NonFiniteFrame for one
// that is not finite, which is never recorded.
void App::take_frame() {
  const ImageRgba8& image = engine_.take_image();
  nonfinite_reported_ = false;
  if (recording_ && !image.pixels.empty()) recording_->submit(image);
}

// Shown once while such frames follow one another; the engine starts the next frame over.
void App::report(const NonFiniteFrame& e) {
  if (!nonfinite_reported_) notify(e.what());
  nonfinite_reported_ = true;
}

void App::toggle_recording() {
  if (recording_) {
    stop_recording();
    return;
  }
  try {
    recording_ = std::make_unique<Recording>(
        open_recorder(state_.record_path, engine_.width(), engine_.height(), options_.fps));
  } catch (const Error& e) {
    notify(e.what());
  }
}

void App::stop_recording() {
  if (!recording_) return;
  try {
    while (engine_.queued_images() > 0) take_frame();
  } catch (const NonFiniteFrame& e) {
    report(e);
  }
  try {
    recording_->finish();
    notify(cat("recorded ", recording_->written(), " frames to ", recording_->path(), " (", recording_->dropped(),
               " dropped)"),
           false);
  } catch (const Error& e) {
    notify(cat("recording failed: ", e.what()));
  }
  recording_.reset();
  if (state_.record_path == default_record_path_) state_.record_path = default_record_path_ = default_record_path();
}

void App::save_screenshot(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  write_png(path, window_.read_pixels());
}

// Shown in the controls panel and logged: the GUI's errors and events are worth a line in a log too.
void App::notify(const std::string& text, bool error) {
  std::fprintf(stderr, "rtvd gui: %s\n", text.c_str());
  messages_.push_back({text, error});
  if (messages_.size() > 4) messages_.erase(messages_.begin());
}

std::string App::recording_status() const {
  if (!recording_) return "";
  return cat(recording_->path(), ": ", recording_->written(), " frames, ", recording_->dropped(), " dropped");
}

OverlayInfo App::overlay_info() {
  OverlayInfo info;
  Backend& backend = engine_.backend();
  info.device = backend.describe();
  info.renderer = window_.renderer();
  info.display_path = upload_->name();
  const std::string rtvd_memory = cat("arena ", mib(backend.arena_bytes()), " + weights ", mib(backend.weight_bytes()));
  if (const auto gpu = gpu_memory(engine_))
    info.memory =
        cat("GPU memory ", mib(gpu->first), " used of ", mib(gpu->second), " (all processes); rtvd: ", rtvd_memory);
  else
    info.memory = "memory: " + rtvd_memory;
  info.frame = cat(engine_.width(), "x", engine_.height(), ", ", applied_.steps, " steps, ", source_->describe());
  info.gpu = backend.is_cuda();
  info.stats = &stats_;
  info.profile = &profile_;
  info.implementations = &implementations_;
  return info;
}

}  // namespace

int run(const GuiOptions& options) {
  App app(options);
  return app.run();
}

}  // namespace rtvd::gui
