// rtvd render: the frame loop, headless. Source -> engine -> recorder, with progress and a summary.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>

#include "cli.h"
#include "commands.h"
#include "pipeline/engine.h"
#include "kernels/common/error.h"
#include "pipeline/backends/profiler.h"
#include "pipeline/io/recorder.h"
#include "pipeline/io/source.h"
#include "progress.h"

namespace rtvd {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

}  // namespace

int render_command(const std::vector<std::string>& args) {
  const cli::RenderOptions o = cli::parse_render_options(args);
  if (o.help) {
    std::printf("usage: rtvd render [flags]\n\nRenders frames headless to an MP4 (H.264) or a PNG sequence.\n\n%s",
                cli::flags_help(cli::render_flags()).c_str());
    return 0;
  }

  std::unique_ptr<FrameSource> source = open_source(o.source);
  Engine engine(o.engine);
  const FrameSettings s = frame_settings(o, engine);
  engine.configure(s, source->has_images());

  const int frames = o.frames ? *o.frames : (source->frame_count() > 0 ? source->frame_count() : cli::kDefaultFrames);
  std::unique_ptr<Recorder> recorder = open_recorder(o.output, engine.width(), engine.height(), o.fps);
  if (!o.quiet) {
    if (!engine.device_note().empty()) std::fprintf(stderr, "note: %s\n", engine.device_note().c_str());
    std::fprintf(stderr, "rendering %d frames of %dx%d from %s with %s on %s\n", frames, engine.width(),
                 engine.height(), source->describe().c_str(), engine.model().source.c_str(),
                 engine.backend().describe().c_str());
  }

  // Ctrl-C stops after the current frame and finalises what was rendered, so the file stays playable.
  g_interrupted = 0;
  auto previous_handler = std::signal(SIGINT, on_interrupt);
  FrameProfile profile;
  double frame_ms_sum = 0;  // every frame's own time: the op-timed samples carry their events' cost
  int frames_timed = 0;
  if (!o.profile_path.empty()) engine.backend().set_profiling(true);
  Progress progress(frames, o.quiet);
  std::vector<float> image;
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  for (; done < frames && !g_interrupted; ++done) {
    if (source->has_images() && !source->next(engine.width(), engine.height(), image)) break;
    engine.step(source->has_images() ? &image : nullptr);
    // The frame is copied to the host while the next one computes; the recorder takes it a frame late.
    engine.queue_image();
    if (engine.queued_images() == 2) recorder->write(engine.take_image());
    if (!o.profile_path.empty()) {
      const std::vector<float> ms = engine.backend().frame_op_ms();
      if (!ms.empty()) profile.add_frame(engine.plan().graph.frame, ms);
      if (const float gpu_ms = engine.backend().frame_gpu_ms(); gpu_ms > 0) frame_ms_sum += gpu_ms, ++frames_timed;
    }
    progress.update(done + 1);
  }
  while (engine.queued_images() > 0) recorder->write(engine.take_image());
  progress.finish();
  std::signal(SIGINT, previous_handler);
  if (done == 0) fail(source->describe(), ": no frame could be read");
  recorder->finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s %d frames (%dx%d, %d steps) to %s in %.1f s: %.2f frames/s\n",
              g_interrupted ? "interrupted: wrote" : "wrote", done, engine.width(), engine.height(), s.steps,
              recorder->path().c_str(), seconds, done / seconds);
  if (!o.profile_path.empty() && profile.frames() > 0) {
    profile.write_chrome_trace(o.profile_path, engine.plan().graph.frame);
    std::printf("\n%s", profile.table(engine.backend().measure_ceilings()).c_str());
    if (frames_timed > 0 && engine.backend().is_cuda())
      std::printf("GPU frame time without per-op timing (every frame): %.3f ms mean; the op-timed frames above include "
                  "their events' cost\n", frame_ms_sum / frames_timed);
    std::printf("slowest layers (ms per frame, summed over steps):\n");
    for (const auto& [layer, ms] : profile.slowest_layers(8)) std::printf("  %-56s %8.3f\n", layer.c_str(), ms);
    std::printf("trace: %s (open in ui.perfetto.dev or chrome://tracing)\n", o.profile_path.c_str());
  }
  return g_interrupted ? 130 : 0;
}

}  // namespace rtvd
