// rtvd render: the frame loop, headless. Source -> engine -> recorder, with progress and a summary.
//
// SIGINT, SIGTERM and SIGHUP stop the loop (app/common/stop_signals.h): the frame being computed is dropped,
// the frames before it are finalised into the output, and the exit code is 128 + the signal's number. An
// error after frames were rendered keeps them the same way before it is reported.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

#include "cli.h"
#include "app/common/control_sources.h"
#include "commands.h"
#include "app/common/startup_notes.h"
#include "app/common/stop_signals.h"
#include "base/error.h"
#include "pipeline/backends/profiler.h"
#include "pipeline/backends/cancel.h"
#include "pipeline/engine.h"
#include "pipeline/io/output_files.h"
#include "pipeline/io/recorder.h"
#include "pipeline/io/source.h"
#include "progress.h"

namespace rtvd {

namespace {

// The output replaces its path when the recording is complete: the source's own file would be lost.
void refuse_output_over_source(const FrameSource& source, const std::string& output) {
  std::error_code ec;
  if (!source.file().empty() && std::filesystem::equivalent(source.file(), output, ec))
    fail(output, ": is the source's file (", source.describe(), "): write the output to another path");
}

// --fps when given; else a video's own rate, so its frames keep their timing.
double output_fps(const cli::RenderOptions& o, const FrameSource& source) {
  if (o.fps) return *o.fps;
  const double fps = source.fps();
  if (fps <= 0) return cli::kDefaultFps;
  if (fps < kMinFps || fps > kMaxFps) {
    std::fprintf(stderr, "note: %s runs at %g frames/s, outside what a recording takes (%g to %g): recording at %g\n",
                 source.describe().c_str(), fps, kMinFps, kMaxFps, cli::kDefaultFps);
    return cli::kDefaultFps;
  }
  return fps;
}

}  // namespace

int render_command(const std::vector<std::string>& args) {
  const cli::RenderOptions o = cli::parse_render_options(args);
  if (o.help) {
    std::printf("usage: rtvd render [flags]\n\nRenders frames headless to an MP4 or MKV (H.264) or a PNG sequence.\n\n"
                "%s", cli::flags_help(cli::render_flags()).c_str());
    return 0;
  }

  // The time to the first frame, step by step from here (the summary's second line). Not from the process's
  // start: a wrapper that execs rtvd (tools/quickstart.sh render, after building) would count as rtvd's.
  Laps startup;
  // The trace is written after the last frame: a place it cannot go is said before the first.
  if (!o.profile_path.empty()) check_file_writable("--profile " + o.profile_path, o.profile_path);
  std::unique_ptr<FrameSource> source = open_source(o.source);
  refuse_output_over_source(*source, o.output);
  startup.lap("source");
  Engine engine(o.engine);
  startup.append(engine.startup());
  const FrameSettings s = frame_settings(o, engine);
  std::vector<std::string> prompt_notices;
  engine.set_prompts(o.prompts, &prompt_notices);  // refuses prompts for a model without a text encoder
  // Refused before the plan is built: the sampler's guidance rule says whether the unconditional half runs.
  if (!o.prompts.negative_prompt.empty() &&
      frame_sampler(engine.model(), s, source->has_images()).batch(s.guidance) == 1)
    fail("--negative-prompt: unused at --guidance ", s.guidance, " (guidance's unconditional half, which it replaces, "
         "runs only above 1)");
  startup.lap("prompts");
  engine.configure(s, source->has_images());
  startup.lap("plan");

  const int frames = o.frames ? *o.frames : (source->frame_count() > 0 ? source->frame_count() : cli::kDefaultFrames);
  const double fps = output_fps(o, *source);
  std::vector<std::string> control_notes;
  ControlSources controls(o.controlnets, engine.width(), engine.height(), frames, control_notes);
  const StopSignals stop_signals;  // before the output exists: from here a signal finalises it
  std::unique_ptr<Recorder> recorder = open_recorder(o.output, engine.width(), engine.height(), fps);
  if (!o.quiet) {
    print_startup_notes(engine, s);
    for (const std::string& notice : prompt_notices) std::fprintf(stderr, "%s\n", notice.c_str());
    for (const std::string& note : control_notes) std::fprintf(stderr, "%s\n", note.c_str());
    const std::string partial =
        recorder->partial_path() == recorder->path() ? "" : " (" + recorder->partial_path() + " until it is complete)";
    std::fprintf(stderr, "rendering %d frames of %dx%d from %s with %s on %s to %s%s\n", frames, engine.width(),
                 engine.height(), source->describe().c_str(), engine.model().source.c_str(),
                 engine.backend().describe().c_str(), recorder->path().c_str(), partial.c_str());
  }

  FrameProfile profile;
  double frame_ms_sum = 0;  // every frame's own time: the op-timed samples carry their events' cost
  int frames_timed = 0;
  if (!o.profile_path.empty()) engine.backend().set_profiling(true);
  Progress progress(frames, o.quiet);
  const auto write_image = [&] {
    recorder->write(engine.take_image());
    if (recorder->frames_written() == 1) startup.lap("first frame");  // computed, on the host and written
  };
  std::vector<uint8_t>& image = engine.source_frame();  // the source's frame in 8-bit RGB, sent from where it is
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  bool source_ended = false;
  std::string stopped_by;  // an error that ended the loop after frames were rendered
  // One frame in; with a stream batch the frame that comes out is latency() frames older (none at first).
  // The frame out is copied to the host while the next one computes; the recorder takes it a frame late, but
  // for the first, written at once: the second may take seconds (with auto it tunes every layer).
  const auto step = [&](const std::vector<uint8_t>* in) {
    if (in) engine.step(*in);
    else engine.step(nullptr);
    if (!engine.has_output()) return;
    engine.queue_image();
    if (engine.queued_images() == 2 || recorder->frames_written() == 0) write_image();
  };
  try {
    for (; done < frames && !cancel_requested(); ++done) {
      if (source->has_images() && !source->next(engine.width(), engine.height(), image)) {
        source_ended = true;
        break;
      }
      controls.next(engine);
      step(source->has_images() ? &image : nullptr);
      if (!o.profile_path.empty()) {
        const std::vector<float> ms = engine.backend().frame_op_ms();
        if (!ms.empty()) profile.add_frame(engine.plan().graph.frame, ms);
        if (const float gpu_ms = engine.backend().frame_gpu_ms(); gpu_ms > 0) frame_ms_sum += gpu_ms, ++frames_timed;
      }
      progress.update(done + 1);
    }
    // The frames still in flight come out after as many more steps, on the last source frame again.
    for (int more = std::min(done, engine.latency()); more > 0 && !cancel_requested(); --more)
      step(source->has_images() ? &image : nullptr);
    while (engine.queued_images() > 0) write_image();
  } catch (const Cancelled&) {
    // A signal stopped the frame in progress: the frames before it are recorded below, up to one that is not
    // finite (the engine drops those after it).
    try {
      while (engine.queued_images() > 0) recorder->write(engine.take_image());
    } catch (const NonFiniteFrame& e) {
      stopped_by = e.what();
    }
  } catch (const RecordingFailed&) {
    progress.finish();
    throw;  // the recorder has kept what it could and says where
  } catch (const Error& e) {
    if (recorder->frames_written() == 0) throw;
    stopped_by = e.what();
  }
  progress.finish();
  const int signo = StopSignals::received();
  if (recorder->frames_written() == 0) {
    if (signo == 0) fail(source->describe(), ": no frame could be read");
    std::printf("interrupted by %s before the first frame: nothing was recorded\n", signal_name(signo));
    return 128 + signo;
  }
  recorder->finish();
  if (!stopped_by.empty())
    fail(stopped_by, "; the ", recorder->frames_written(), " frames rendered before it are in ", recorder->path());

  const int written = recorder->frames_written();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string stream =
      s.stream_batch > 1 ? cat(", stream batch ", s.stream_batch, ": ", engine.latency(), " frames of latency") : "";
  std::printf("%s%s %d frames (%dx%d, %d steps%s) to %s in %.1f s: %.2f frames/s\n",
              signo ? "interrupted by " : "", signo ? cat(signal_name(signo), ": wrote").c_str() : "wrote", written,
              engine.width(), engine.height(), s.steps, stream.c_str(), recorder->path().c_str(), seconds,
              written / seconds);
  double first_frame_s = 0;
  std::string steps;
  for (const auto& [what, seconds] : startup.parts()) {
    char step[64];
    std::snprintf(step, sizeof step, "%s%s %.2f", steps.empty() ? "" : ", ", what.c_str(), seconds);
    first_frame_s += seconds, steps += step;
  }
  std::printf("first frame %.2f s after the command started (%s s)\n", first_frame_s, steps.c_str());
  if (s.skip_similar > 0)
    std::printf("skipped %lld of %d frames (--skip-similar %g: their source as the last rendered one's, the frame "
                "before written again)\n", (long long)engine.skipped_frames(), written, double(s.skip_similar));
  if (s.cache_refresh > 0)
    std::printf("feature cache: %lld full frames (every %d, %lld more where the source moved: --cache-similarity %g), "
                "the others cached\n", (long long)engine.full_frames(), s.cache_refresh,
                (long long)engine.source_refreshes(), double(s.cache_similarity));
  if (!recorder->note().empty()) std::fprintf(stderr, "note: %s\n", recorder->note().c_str());
  if (source_ended && written < frames)
    std::fprintf(stderr, "note: %s ended after %d frames, before the %d asked for\n", source->describe().c_str(),
                 written, frames);
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
  return signo ? 128 + signo : 0;
}

}  // namespace rtvd
