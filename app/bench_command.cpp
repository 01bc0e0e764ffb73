// rtvd bench: the benchmarks' dispatch, and rtvd bench frames: end-to-end frame rate of the engine (no recording),
// median over many frames after warm-up, the per-op profile against ceilings measured in the same run, and the
// profiler's overhead. The others, one component alone: bench_components.cpp.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "bench_cache_error.h"
#include "bench_components.h"
#include "bench_report.h"
#include "bench_source.h"
#include "build_config.h"
#include "cli.h"
#include "commands.h"
#include "controlnet_flags.h"
#include "pipeline/engine.h"
#include "base/error.h"
#include "pipeline/models/model.h"

namespace rtvd {

namespace {

constexpr const char* kBenchUsage =
    "usage: rtvd bench <benchmark> [flags]\n"
    "\n"
    "benchmarks:\n"
    "  frames   end-to-end frames/s of the engine, without recording, with a per-op profile\n"
    "  unet     one U-Net forward alone (SD 2.1, SD 1.5 or a model directory): time, TFLOP/s, time to\n"
    "           first output, memory\n"
    "  text     one text encoder forward alone (a diffusers folder's or a text_encoder/ folder): time,\n"
    "           TFLOP/s\n"
    "  kernels  every op at the production cases of its table, on the GPU (CUDA builds)\n"
    "\n"
    "`rtvd bench <benchmark> --help` for a benchmark's flags.\n";

// rtvd bench frames: render's model and sampling flags, read as render reads them.
const std::vector<cli::FlagSpec>& bench_flags() {
  using K = cli::ValueKind;
  static const std::vector<cli::FlagSpec> specs = [] {
    std::vector<cli::FlagSpec> own = {
        {"frames", 'n', K::Int, "timed frames per measurement", "200", "N"},
        {"img2img", 0, K::None, "every frame from an image at --strength (a fixed random one; --moving: a pan), as a "
         "video source runs", "", ""},
        {"moving", 0, K::None,
         "with --img2img: the source pans over a picture, 2 px right and 1 down a frame; with --feature-cache, "
         "the cache's error against the uncached frames, per frame", "", ""},
    };
    const std::vector<cli::FlagSpec> generation = cli::generation_flags(
        {"size", "steps", "guidance", "strength", "stream-batch", "skip-similar", "feature-cache", "cache-similarity",
         "sampler", "model", "vae", "lora", "prediction-type", "timestep-spacing", "config"});
    own.insert(own.end(), generation.begin(), generation.end());
    for (cli::FlagSpec f : cli::controlnet_flags()) {  // render's, but the controls come from --img2img's image
      if (f.name == "control") {
        f.help = "the last --controlnet's control image: Canny edges of the --img2img image, or that image itself";
        f.value_name = "canny|source";
      }
      own.push_back(f);
    }
    return with_backend_flags(own);
  }();
  return specs;
}

struct FrameMs {
  double median = 0, mean = 0;  // the mean counts a feature cache's full frames at their share
};

// Milliseconds per frame over `frames` frames, after `warmup` untimed ones, each from the source's next image
// (null source: the noise walk) and read back; the images are made (at one frame per call into the engine's
// source_frame(), as render's sources decode into it) and after_call runs outside the timed region.
// Timed by calls of the plan: a stream batch's call takes a group of frames in (and gives as many out), its time
// shared by them.
template <class F>
FrameMs frame_ms(Engine& engine, BenchSource* source, int warmup, int frames, F&& after_call) {
  const int group = engine.plan().group;
  const auto call = [&] {  // the call's time in ms
    std::vector<const std::vector<uint8_t>*> images =
        source ? source->next(group) : std::vector<const std::vector<uint8_t>*>(size_t(group), nullptr);
    if (group == 1 && images[0]) {  // one frame per call: made in the engine's buffer, as render's sources decode
      engine.source_frame() = *images[0];
      images[0] = &engine.source_frame();
    }
    const auto s = std::chrono::steady_clock::now();
    for (const std::vector<uint8_t>* image : images) {
      if (image) engine.step(*image);
      else engine.step(nullptr);
    }
    if (engine.has_output()) engine.image();  // the calls before the first group leaves bring nothing out
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
  };
  for (int i = 0; i < warmup + engine.plan().slots(); ++i) call();  // until frames come out
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, frames / group); ++i) {
    ms.push_back(call() / group);
    after_call();
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], std::accumulate(ms.begin(), ms.end(), 0.0) / double(ms.size())};
}

// Each stage of the frame (frame_stage) timed without op events: every run of consecutive ops of one stage
// replayed alone, summed per stage (a multi-step frame has one U-Net run per step), in frame order. Empty on
// the CPU.
std::vector<OpTypeRow> time_stages_alone(Engine& engine) {
  const std::vector<Op>& ops = engine.plan().graph.frame;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t i = 0; i < ops.size(); ++i)
    if (i == 0 || frame_stage(ops[i].layer) != frame_stage(ops[i - 1].layer)) ranges.push_back({i, i + 1});
    else ranges.back().second = i + 1;
  const std::vector<double> ms = engine.backend().time_op_ranges(ranges, 100);
  std::vector<OpTypeRow> out;
  for (size_t r = 0; r < ms.size(); ++r) {
    OpTypeRow& row = row_named(out, frame_stage(ops[ranges[r].first].layer));
    row.calls += int(ranges[r].second - ranges[r].first);
    row.ms += ms[r];
  }
  return out;
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    std::fputs(kBenchUsage, stdout);
    return 0;
  }
  if (!args.empty() && args[0] == "kernels") return bench_kernels_command({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "unet") return bench_unet_command({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "text") return bench_text_command({args.begin() + 1, args.end()});
  if (args.empty()) fail("rtvd bench needs a benchmark: frames, unet, text or kernels (see rtvd bench --help)");
  if (args[0] != "frames")
    fail("unknown benchmark '", args[0], "' (expected frames, unet, text or kernels; see rtvd bench --help)");
  const cli::Flags flags = cli::parse_flags("bench frames", bench_flags(), {args.begin() + 1, args.end()});
  if (flags.has("help")) {
    std::printf("usage: rtvd bench frames [flags]\n\nEnd-to-end frames per second of the engine, without recording.\n\n%s",
                cli::flags_help(bench_flags()).c_str());
    return 0;
  }
  cli::RenderOptions options;
  cli::read_generation_flags(flags, options);
  cli::read_controlnet_flags(flags, options, options.controlnets);
  for (const cli::ControlNetOption& net : options.controlnets) {
    if (net.control)
      fail("flag '--control': rtvd bench frames takes canny or source (its images are the bench's own; files are "
           "rtvd render's)");
    if (!flags.has("img2img"))
      fail("flag '--control': only with --img2img (frames from noise have no image to take the control from)");
  }
  const GenerationOptions& o = options;
  if (flags.has("strength") && !flags.has("img2img"))
    fail("flag '--strength': only with --img2img (frames from noise have no image to re-noise)");
  if (flags.has("skip-similar") && !flags.has("img2img"))
    fail("flag '--skip-similar': only with --img2img (frames from noise have no source to compare)");
  if (flags.has("moving") && !flags.has("img2img"))
    fail("flag '--moving': only with --img2img (frames from noise have no source to move)");
  const int frames = flags.get_int("frames", 200, 3, 1000000);
  Engine engine(o.engine);
  const FrameSettings s = frame_settings(o, engine);
  const bool img2img = flags.has("img2img");
  engine.configure(s, img2img);
  std::optional<BenchSource> images;  // 8-bit RGB, as the frame sources give it
  if (img2img) images.emplace(engine.width(), engine.height(), engine.model().image_channels(), flags.has("moving"));
  BenchSource* source = img2img ? &*images : nullptr;
  const bool moving = source && source->moving();
  const int warmup = std::max(3, frames / 10);

  // With --skip-similar, the filter's frames first (of the fixed image all but the first are skipped, of the pan
  // none), then every frame rendered (the filter off) for the numbers and the profile below.
  double filtered_ms = 0, skipped_fraction = 0;
  if (s.skip_similar > 0) {
    int skipped = 0;  // of the timed frames
    filtered_ms = frame_ms(engine, source, warmup, frames, [&] { skipped += engine.skipped(); }).median;
    skipped_fraction = double(skipped) / frames;
    FrameSettings every_frame = s;
    every_frame.skip_similar = 0;
    engine.configure(every_frame, img2img);
  }
  const FrameMs plain = frame_ms(engine, source, warmup, frames, [] {});
  const double plain_ms = plain.median;
  engine.backend().set_profiling(true);
  FrameProfile profile;
  std::vector<double> gpu_ms;  // the frame's graph, timed by events around its launch: the frames without op events
  const double profiled_ms = frame_ms(engine, source, warmup, frames, [&] {
    const std::vector<float> ms = engine.backend().frame_op_ms();
    if (!ms.empty()) profile.add_frame(engine.plan().graph.frame, ms);
    else if (const float gpu = engine.backend().frame_gpu_ms(); gpu > 0) gpu_ms.push_back(gpu);
  }).median;
  const double gpu_frame_ms = gpu_ms.empty() ? 0.0 : median(gpu_ms);
  const std::vector<OpTypeRow> stages_alone = time_stages_alone(engine);  // before profiling's graphs go
  engine.backend().set_profiling(false);
  const Ceilings ceilings = engine.backend().measure_ceilings();
  std::optional<CacheError> cache_error;  // after every timing: the same frames without the cache
  if (s.cache_refresh > 0 && moving) cache_error = feature_cache_error(engine, s, *source, std::min(frames, 24));

  std::printf("%s\nmodel %s, %dx%d, %s, %d steps, batch %d\n", engine.backend().describe().c_str(),
              engine.config().name.c_str(), engine.width(), engine.height(),
              moving ? "img2img, moving source (a pan)" : img2img ? "img2img, one fixed image" : "from noise", s.steps,
              engine.plan().batch);
  std::printf("frame: %s ms median over %d frames = %s frames/s (including the RGBA8 read-back)\n",
              three_digits(plain_ms).c_str(), frames, three_digits(1e3 / plain_ms).c_str());
  // A frame waits for the K - 1 after it (stream batch K), then for the call that brings it out.
  const double latency_ms = s.stream_batch * plain_ms;
  if (s.stream_batch > 1)
    std::printf("stream batch %d: %d frames per call of the U-Net, each out %d frames after its source; latency %s ms "
                "at that frame rate\n",
                s.stream_batch, engine.plan().group, engine.latency(), three_digits(latency_ms).c_str());
  if (s.skip_similar > 0)
    std::printf("with --skip-similar %g: %s ms median = %s frames/s, %s%% of the frames skipped\n",
                double(s.skip_similar), three_digits(filtered_ms).c_str(), three_digits(1e3 / filtered_ms).c_str(),
                three_digits(100.0 * skipped_fraction).c_str());
  if (s.cache_refresh > 0)  // the median is a cached frame's where most are; the mean counts the full ones too
    std::printf("feature cache: a full frame every %d frames; mean %s ms per frame = %s frames/s (the profile below: "
                "the full frames)\n", s.cache_refresh, three_digits(plain.mean).c_str(), three_digits(1e3 / plain.mean).c_str());
  if (cache_error) std::printf("%s\n", cache_error->line().c_str());
  // Two medians of separate runs: where profiling costs less than they vary, the second can be the lower.
  const double difference = 100.0 * (profiled_ms / plain_ms - 1.0), overhead = std::max(0.0, difference);
  if (gpu_frame_ms > 0 && engine.backend().is_cuda())
    std::printf("the GPU's time of a call's graph: %s ms median per frame; the rest of the frame, %s ms, is the host's "
                "and the copies' to and from the GPU\n",
                three_digits(gpu_frame_ms / engine.plan().group).c_str(),
                three_digits(plain_ms - gpu_frame_ms / engine.plan().group).c_str());
  std::printf("with per-op profiling: %s ms (overhead %s)\n\n%s", three_digits(profiled_ms).c_str(),
              difference >= 0 ? cat(three_digits(difference), "%").c_str()
                              : cat("none measurable: this median is ", three_digits(-difference),
                                    "% below the first, as two runs' medians differ").c_str(),
              profile.table(ceilings).c_str());
  const nlohmann::json slowest = print_slowest_layers(profile, engine.plan().graph.frame, engine.backend(), 24, "frame");
  if (!stages_alone.empty()) {
    std::printf("stages alone (each replayed as a CUDA graph of its own, no event between its ops):");
    for (const OpTypeRow& r : stages_alone) std::printf(" %s %.3f ms;", r.type.c_str(), r.ms);
    std::printf("\n");
  }

  if (const std::string path = flags.get_string("json", ""); !path.empty()) {
    nlohmann::json ops = nlohmann::json::array();
    for (const OpTypeRow& r : profile.by_type())
      ops.push_back({{"op", r.type}, {"calls", r.calls}, {"ms", r.ms}, {"flops", r.flops}, {"bytes", r.bytes}});
    nlohmann::json stages = nlohmann::json::array();  // op-timed: encode, U-Net, sampler, decode
    for (const OpTypeRow& r : profile.by_stage())
      stages.push_back({{"stage", r.type}, {"ops", r.calls}, {"ms", r.ms}, {"flops", r.flops}, {"bytes", r.bytes}});
    nlohmann::json doc = {
        {"bench", "frames"}, {"date", utc_now()}, {"backend", engine.backend().describe()},
        {"model", engine.config().name}, {"width", engine.width()}, {"height", engine.height()}, {"steps", s.steps},
        {"img2img", img2img}, {"moving", moving}, {"stream_batch", s.stream_batch}, {"frames_per_call", engine.plan().group},
        {"latency_frames", engine.latency()}, {"latency_ms", latency_ms},
        {"feature_cache", cache_error ? cache_error->json(s.cache_refresh) : nlohmann::json{{"refresh", s.cache_refresh}}},
        {"batch", engine.plan().batch}, {"frames", frames}, {"frame_ms_median", plain_ms}, {"frame_ms_mean", plain.mean},
        {"frames_per_second", 1e3 / plain_ms}, {"profiled_frame_ms_median", profiled_ms},
        {"profiler_overhead_percent", overhead},
        {"gpu_frame_ms_median", engine.backend().is_cuda() ? gpu_frame_ms / engine.plan().group : 0.0},
        {"ceilings", ceilings_json(ceilings)},
        {"ops_per_frame", ops}, {"stages_per_frame", stages}, {"slowest_layers", slowest}};
    if (s.skip_similar > 0)
      doc["skip_similar"] = {{"threshold", s.skip_similar}, {"skipped_fraction", skipped_fraction},
                             {"frame_ms_median", filtered_ms}, {"frames_per_second", 1e3 / filtered_ms}};
    for (const OpTypeRow& r : stages_alone)  // per frame: a stage's runs of ops, each replayed alone, summed
      doc["stages_alone_per_frame"].push_back({{"stage", r.type}, {"ops", r.calls}, {"ms", r.ms}});
    write_json(path, doc);
  }
  return 0;
}

}  // namespace rtvd
