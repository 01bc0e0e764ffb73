// rtvd bench frames: end-to-end frame rate of the engine (no recording), median over many frames after
// warm-up, the per-op profile against ceilings measured in the same run, and the profiler's overhead.
// rtvd bench unet: one U-Net forward alone (SD-class configs), its time to first output and memory.
// rtvd bench text: one CLIP text encoder forward alone (77 tokens), from a model's text_encoder/ folder.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench_cache_error.h"
#include "bench_source.h"
#include "build_config.h"
#include "cli.h"
#include "commands.h"
#include "controlnet_flags.h"
#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "pipeline/laps.h"
#include "base/error.h"
#include "pipeline/models/model.h"
#include "pipeline/text_encoder.h"
#include "pipeline/unet_runner.h"
#include "process_clock.h"
#if RTVD_HAS_CUDA
#include "bench/kernel_bench.h"
#endif

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

// A benchmark's own flags, then those of every benchmark that runs a model on a backend.
std::vector<cli::FlagSpec> with_backend_flags(std::vector<cli::FlagSpec> specs) {
  using K = cli::ValueKind;
  specs.insert(specs.end(), cli::backend_flags().begin(), cli::backend_flags().end());
  specs.insert(specs.end(), {
                                {"json", 0, K::String, "write the results as JSON", "", "FILE"},
                                {"help", 'h', K::None, "show this help", "", ""},
                            });
  return specs;
}

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
// (null source: the noise walk) and read back; the images are made and after_call runs outside the timed region.
// Timed by calls of the plan: a stream batch's call takes a group of frames in (and gives as many out), its time
// shared by them.
template <class F>
FrameMs frame_ms(Engine& engine, BenchSource* source, int warmup, int frames, F&& after_call) {
  const int group = engine.plan().group;
  const auto call = [&] {  // the call's time in ms
    const std::vector<const std::vector<uint8_t>*> images =
        source ? source->next(group) : std::vector<const std::vector<uint8_t>*>(size_t(group), nullptr);
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

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

void write_json(const std::string& path, const nlohmann::json& doc) {
  std::ofstream f(path);
  if (!(f << doc.dump(2) << "\n")) fail("--json ", path, ": cannot write");
}

// The NVIDIA kernel module's version ("580.159.04"), or "unknown": the first word of the first line made
// of digits and dots ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release ...").
std::string nvidia_driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  std::getline(f, line);
  std::istringstream words(line);
  for (std::string word; words >> word;)
    if (word.find('.') != std::string::npos && word.find_first_not_of("0123456789.") == std::string::npos) return word;
  return "unknown";
}

// The commit of a bundle (tools/device-bundle.sh writes .commit beside the binary), or "unknown".
std::string bundle_commit() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::ifstream f(exe.parent_path() / ".commit");
  std::string commit;
  return f >> commit ? commit : "unknown";
}

int bench_kernels_command(const std::vector<std::string>& args) {
  using K = cli::ValueKind;
  static const std::vector<cli::FlagSpec> specs = {
      {"runs", 0, K::Int, "timed runs per case (the median is reported)", "50", "N"},
      {"op", 0, K::String, "only this op's cases (conv2d, attention, linear, layer_norm, ...)", "", "NAME"},
      {"json", 0, K::String, "write the results as JSON", "", "FILE"},
      {"help", 'h', K::None, "show this help", "", ""},
  };
  const cli::Flags flags = cli::parse_flags("bench kernels", specs, args);
  if (flags.has("help")) {
    std::printf("usage: rtvd bench kernels [flags]\n\nEvery op at the production cases of its table; conv2d, attention and linear by "
                "candidate,\ndefault first.\n\n%s",
                cli::flags_help(specs).c_str());
    return 0;
  }
  std::string why_not;
  const auto gpus = cuda_devices(&why_not);
  if (gpus.empty()) fail("rtvd bench kernels needs a CUDA device: ", why_not);
#if RTVD_HAS_CUDA
  nlohmann::json doc = bench_kernels(gpus.front(), flags.get_int("runs", 50, 3, 100000), flags.get_string("op", ""));
  doc["bench"] = "kernels";
  doc["date"] = utc_now();
  if (const std::string path = flags.get_string("json", ""); !path.empty()) write_json(path, doc);
#endif
  return 0;
}

const std::vector<cli::FlagSpec>& bench_unet_flags() {
  using K = cli::ValueKind;
  static const std::vector<cli::FlagSpec> specs = with_backend_flags({
      {"config", 0, K::String, "sd21, sd15, a model directory or a config.json", "sd21", "NAME|DIR|FILE"},
      {"model", 0, K::String, "instead of --config: a checkpoint (a diffusers folder or one file), its U-Net with its weights",
       "", "DIR|FILE"},
      {"batch", 0, K::Int, "images per forward (2: guidance's cond + uncond)", "2", "N"},
      {"size", 0, K::Int, "square latent size", "the config's sample size", "N"},
      {"weights", 0, K::String, "safetensors checkpoint in the config's dtype", "random weights", "FILE"},
      {"seed", 0, K::Int, "seed of the random weights and inputs", "0", "N"},
      {"runs", 0, K::Int, "timed forwards (the median is reported)", "200 on the GPU, 3 on the CPU", "N"},
      {"profile", 0, K::None, "after timing, per-op profile and the slowest layers with their implementation", "", ""},
  });
  return specs;
}

// The n slowest layers of a profile (ms per frame or forward, summed over steps) with the implementation the
// backend runs each with, printed under a heading and returned for the JSON.
nlohmann::json print_slowest_layers(const FrameProfile& profile, const std::vector<Op>& ops, const Backend& backend,
                                    int n, const char* per) {
  std::printf("slowest layers (ms per %s, implementation):\n", per);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [layer, layer_ms] : profile.slowest_layers(n)) {
    size_t i = 0;
    while (i < ops.size() && ops[i].layer != layer) ++i;
    const std::string impl = backend.frame_op_impl(i);
    std::printf("  %-60s %8.3f  %s\n", layer.c_str(), layer_ms, impl.c_str());
    rows.push_back({{"layer", layer}, {"ms", layer_ms}, {"implementation", impl}});
  }
  return rows;
}

// " = 42% of the 760 TFLOP/s GEMM peak measured now (floor 2.04 ms)" for a forward of `flops` at `tflops`, or
// "" where the backend has no ceilings (the CPU's).
std::string against_gemm_peak(double tflops, double flops, const Ceilings& c) {
  if (!c.none.empty()) return "";
  return cat(" = ", int(100 * tflops / c.gemm_tflops + 0.5), "% of the ", three_digits(c.gemm_tflops),
             " TFLOP/s GEMM peak measured now (floor ", three_digits(flops / c.gemm_tflops / 1e9), " ms)");
}

// The ceilings as the JSON records them: none on the CPU, with why.
nlohmann::json ceilings_json(const Ceilings& c) {
  if (!c.none.empty()) return {{"none", c.none}};
  return {{"gemm_tflops", c.gemm_tflops}, {"gemm", c.gemm_what}, {"copy_gbps", c.copy_gbps}, {"copy", c.copy_what}};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_unet_command(const std::vector<std::string>& args) {
  const double to_main_s = seconds_since_process_start();  // exec, dynamic loading, static initialisers
  const cli::Flags flags = cli::parse_flags("bench unet", bench_unet_flags(), args);
  if (flags.has("help")) {
    std::printf("usage: rtvd bench unet [flags]\n\nOne U-Net forward alone: time (median of many, one CUDA graph on the GPU), TFLOP/s,\n"
                "time to first output from process start, and memory.\n\n%s",
                cli::flags_help(bench_unet_flags()).c_str());
    return 0;
  }
  if (!flags.positional().empty())
    fail("unexpected argument '", flags.positional().front(), "' for 'rtvd bench unet' (see rtvd bench unet --help)");
  const std::string model_path = flags.get_string("model", "");
  if (!model_path.empty() && (flags.has("config") || flags.has("weights")))
    fail("flag '--model': a checkpoint brings its own config and weights (no --config or --weights with it)");
  const std::string config_spec = flags.get_string("config", "sd21");
  // A checkpoint is read before the backend (its config sizes the run); its time counts as the weights step.
  Model model;
  Laps checkpoint_read;
  if (!model_path.empty()) {
    ModelOptions options;
    options.path = model_path;
    model = load_model(options);
  }
  checkpoint_read.lap("weights");
  const ModelConfig cfg = model_path.empty() ? find_model_config(config_spec) : model.config;
  const int batch = flags.get_int("batch", 2, 1, 64);
  const int size = flags.get_int("size", cfg.sample_size, 1, 4096);
  if (size % cfg.size_multiple()) fail("--size ", size, ": must be a multiple of ", cfg.size_multiple(), " for this config");
  const std::string weights_path = flags.get_string("weights", "");
  const int seed = flags.get_int("seed", 0, 0);
  EngineOptions backend_options;  // --device --threads --kernels
  cli::read_backend_flags(flags, backend_options);
  const KernelFamily kernels = backend_options.kernels;

  std::string why_cpu;
  const std::optional<GpuInfo> gpu = chosen_gpu(backend_options.device, &why_cpu);
  const bool cuda = gpu.has_value();
  const int runs = flags.get_int("runs", cuda ? 200 : 3, 1, 100000);

  // Each step from process start to the first output, in seconds; the CUDA context is made first, so
  // that the memory it holds is not counted as the model's.
  Laps steps;
  steps.add({"start", to_main_s});
  const size_t memory_before = cuda ? cuda_memory_used(gpu->index) : 0;
  auto backend = make_backend(gpu, backend_options.threads, kernels, why_cpu);
  steps.lap("backend");
  if (!model_path.empty()) {
    steps.add(checkpoint_read.parts().front());
  } else {
    if (weights_path.empty()) {
      model = random_model(cfg, uint64_t(seed), config_spec);
    } else {
      model.config = cfg;
      model.weights = std::make_unique<WeightStore>(SafeTensorsFile::open(weights_path));
    }
    steps.lap("weights");
  }
  WeightStore& weights = *model.weights;
  UNetRunner runner(cfg, weights, *backend, batch, size, size, 0.5f);
  if (model_path.empty()) weights.check_all_read();  // a checkpoint's store also holds its autoencoder
  steps.append(runner.load_times());

  std::mt19937_64 rng{uint64_t(seed)};
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(batch) * size * size * cfg.in_channels), context;
  for (float& v : x) v = normal(rng);
  if (cfg.cross_attention_dim > 0) {
    context.resize(size_t(batch) * cfg.context_length * cfg.cross_attention_dim);
    for (float& v : context) v = normal(rng);
  }
  std::vector<int32_t> class_ids;
  for (int i = 0; i < batch && cfg.num_class_embeds > 0; ++i) class_ids.push_back(i % 2 ? cfg.null_class() : 0);
  // SDXL's added conditioning: a random pooled text embedding; the time ids of an uncropped frame at this size.
  std::vector<float> text_embeds, time_ids;
  if (cfg.text_time()) {
    text_embeds.resize(size_t(batch) * cfg.text_embeds_dim());
    for (float& v : text_embeds) v = normal(rng);
    const float side = float(size * model.pixels_per_latent());
    for (int i = 0; i < batch; ++i) time_ids.insert(time_ids.end(), {side, side, 0.0f, 0.0f, side, side});
  }
  runner.set_inputs(x, class_ids, context, text_embeds, time_ids);
  steps.lap("inputs");
  runner.forward();
  const std::vector<float> v = runner.output();
  steps.lap("first forward");
  const double first_output_s = seconds_since_process_start();

  double square_sum = 0;
  bool finite = true;
  for (float f : v) finite = finite && std::isfinite(f), square_sum += double(f) * f;
  const double rms = std::sqrt(square_sum / double(v.size()));
  runner.time_forwards(std::max(2, runs / 10));  // warm-up: the CUDA graph is captured at the second forward
  const std::vector<double> ms = runner.time_forwards(runs);
  const size_t memory_after = cuda ? cuda_memory_used(gpu->index) : 0;
  const Ceilings ceilings = backend->measure_ceilings();

  const double ms_median = median(ms), flops = runner.forward_flops();
  const double tflops = flops / ms_median / 1e9;
  const double mib = 1048576.0;
  std::string step_text;
  for (const auto& [what, s] : steps.parts()) {
    char text[64];
    std::snprintf(text, sizeof text, "%s%s %.3f", step_text.empty() ? "" : ", ", what.c_str(), s);
    step_text += text;
  }
  std::printf("rtvd bench unet: %s (%s), batch %d, %dx%dx%d latents", cfg.name.c_str(),
              (model_path.empty() ? config_spec : model_path).c_str(), batch, size, size,
              cfg.in_channels);
  if (cfg.cross_attention_dim > 0) std::printf(", context %dx%d", cfg.context_length, cfg.cross_attention_dim);
  std::printf("\nbackend: %s\n", backend->describe().c_str());
  // A checkpoint's store holds its autoencoder too: the U-Net's own count, as rtvd info gives it.
  const int64_t parameters = model_path.empty() ? weights.checkpoint_parameters() : model.unet().parameters;
  const std::string weights_from = !model_path.empty() ? cat(model_path, "'s unet (", model.unet().source, ")")
                                   : !weights_path.empty() ? weights_path : cat("random (seed ", seed, ")");
  std::printf("weights: %s, %lld parameters, %s\n", weights_from.c_str(), (long long)parameters, dtype_name(cfg.dtype));
  std::printf("forward: %.3f ms median of %d (min %.3f, max %.3f), %.4g GFLOP, %s TFLOP/s%s\n", ms_median, runs,
              *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()), flops / 1e9,
              three_digits(tflops).c_str(), against_gemm_peak(tflops, flops, ceilings).c_str());
  std::printf("time to first output: %.3f s from process start (%s)\n", first_output_s, step_text.c_str());
  std::printf("memory: weights %.1f MiB, activations %.1f MiB", backend->weight_bytes() / mib, backend->arena_bytes() / mib);
  if (cuda) std::printf("; GPU memory in use grew by %.1f MiB after the CUDA context", (memory_after - memory_before) / mib);
  std::printf("\noutput: %s, rms %.4f\n", finite ? "finite" : "NOT FINITE", rms);

  // Profiled forwards after the timed ones, so that profiling never touches the reported time.
  FrameProfile profile;
  nlohmann::json slowest;
  if (flags.has("profile")) {
    backend->set_profiling(true);
    for (int i = 0; i < 2000 && profile.frames() < 20; ++i) {
      runner.forward();
      runner.output();  // the forward has completed: its times can be read
      if (const std::vector<float> op_ms = backend->frame_op_ms(); !op_ms.empty()) profile.add_frame(runner.graph().frame, op_ms);
    }
    backend->set_profiling(false);
    std::printf("\n%s\n", profile.table(ceilings).c_str());
    slowest = print_slowest_layers(profile, runner.graph().frame, *backend, 16, "forward");
  }

  if (const std::string path = flags.get_string("json", ""); !path.empty()) {
    nlohmann::json step_json = nlohmann::json::object();
    for (const auto& [what, s] : steps.parts()) step_json[what] = s;
    const nlohmann::json doc = {
        {"bench", "unet"}, {"date", utc_now()}, {"commit", bundle_commit()},
        {"gpu", cuda ? gpu->name : "cpu"}, {"driver", cuda ? nvidia_driver_version() : ""},
        {"backend", backend->describe()}, {"kernels", kernel_family_name(kernels)}, {"config", model_path.empty() ? config_spec : model_path}, {"model", cfg.name},
        {"batch", batch}, {"height", size}, {"width", size},
        {"weights", !model_path.empty() ? model_path : weights_path.empty() ? cat("random seed ", seed) : weights_path},
        {"parameters", parameters}, {"runs", runs}, {"ms_median", ms_median},
        {"ms_min", *std::min_element(ms.begin(), ms.end())}, {"ms_max", *std::max_element(ms.begin(), ms.end())},
        {"forward_flops", flops}, {"setup_flops", runner.setup_flops()}, {"tflops", tflops},
        {"ceilings", ceilings_json(ceilings)}, {"time_to_first_output_s", first_output_s}, {"steps_s", step_json},
        {"weight_bytes", backend->weight_bytes()}, {"activation_bytes", backend->arena_bytes()},
        {"gpu_memory_growth_bytes", memory_after - memory_before},
        {"output_finite", finite}, {"output_rms", rms}};
    nlohmann::json with_profile = doc;
    if (ceilings.none.empty()) with_profile["floor_ms"] = flops / ceilings.gemm_tflops / 1e9;
    for (const OpTypeRow& r : profile.by_type())
      with_profile["ops_per_forward"].push_back({{"op", r.type}, {"calls", r.calls}, {"ms", r.ms}, {"flops", r.flops}, {"bytes", r.bytes}});
    with_profile["slowest_layers"] = slowest;
    write_json(path, with_profile);
  }
  if (!finite) fail("the forward's output is not finite (NaN or inf): a broken kernel or an fp16 overflow");
  return 0;
}

const std::vector<cli::FlagSpec>& bench_text_flags() {
  using K = cli::ValueKind;
  static const std::vector<cli::FlagSpec> specs = with_backend_flags({
      {"model", 0, K::String, "a diffusers folder, or its text_encoder/ folder", "", "DIR"},
      {"batch", 0, K::Int, "prompts per forward (2: guidance's cond + uncond)", "1", "N"},
      {"clip-skip", 0, K::Int, "text encoder layers skipped from the end", "0", "N"},
      {"runs", 0, K::Int, "timed forwards (the median is reported)", "200 on the GPU, 3 on the CPU", "N"},
  });
  return specs;
}

int bench_text_command(const std::vector<std::string>& args) {
  const cli::Flags flags = cli::parse_flags("bench text", bench_text_flags(), args);
  if (flags.has("help")) {
    std::printf("usage: rtvd bench text [flags]\n\nOne text encoder forward alone at 77 tokens: time (median of many, one "
                "CUDA graph on the\nGPU), TFLOP/s.\n\n%s", cli::flags_help(bench_text_flags()).c_str());
    return 0;
  }
  if (!flags.positional().empty())
    fail("unexpected argument '", flags.positional().front(), "' for 'rtvd bench text' (see rtvd bench text --help)");
  std::string dir = flags.get_string("model", "");
  if (dir.empty()) fail("rtvd bench text needs --model DIR (a diffusers folder or its text_encoder/ folder)");
  if (std::filesystem::is_directory(dir + "/text_encoder")) dir += "/text_encoder";
  const int batch = flags.get_int("batch", 1, 1, 64);
  EngineOptions backend_options;  // --device --threads --kernels
  cli::read_backend_flags(flags, backend_options);
  std::string why_cpu;
  const std::optional<GpuInfo> gpu = chosen_gpu(backend_options.device, &why_cpu);
  auto backend = make_backend(gpu, backend_options.threads, backend_options.kernels, why_cpu);
  const bool cuda = backend->is_cuda();
  const int runs = flags.get_int("runs", cuda ? 200 : 3, 1, 100000);
  TextEncoder encoder(dir, *backend, flags.get_int("clip-skip", 0, 0));

  // Token ids as a prompt gives them: BOS, words, EOS, then padding.
  std::mt19937_64 rng{0};
  std::vector<int32_t> ids(size_t(batch) * encoder.tokens());
  const int vocab = encoder.config().vocab_size;
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(rng() % uint64_t(std::max(1, vocab - 2)));
  const std::vector<float> hidden = encoder.encode(ids, batch);
  bool finite = true;
  for (float f : hidden) finite = finite && std::isfinite(f);
  encoder.time_forwards(ids, batch, std::max(2, runs / 10));  // warm-up: the CUDA graph is captured at the second
  const std::vector<double> ms = encoder.time_forwards(ids, batch, runs);
  const Ceilings ceilings = backend->measure_ceilings();
  const double ms_median = median(ms), flops = encoder.forward_flops();
  const double tflops = flops / ms_median / 1e9;
  const ClipTextConfig& c = encoder.config();
  std::printf("rtvd bench text: %s, %d layers of %d (%d heads), batch %d x %d tokens\nbackend: %s\n", dir.c_str(),
              c.num_hidden_layers, c.hidden_size, c.num_attention_heads, batch, encoder.tokens(), backend->describe().c_str());
  std::printf("forward: %.3f ms median of %d (min %.3f, max %.3f), %.4g GFLOP, %s TFLOP/s%s\noutput: %s\n", ms_median,
              runs, *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()), flops / 1e9,
              three_digits(tflops).c_str(), against_gemm_peak(tflops, flops, ceilings).c_str(),
              finite ? "finite" : "NOT FINITE");
  if (const std::string path = flags.get_string("json", ""); !path.empty()) {
    nlohmann::json doc = {{"bench", "text"}, {"date", utc_now()}, {"commit", bundle_commit()},
                      {"gpu", gpu ? gpu->name : "cpu"}, {"driver", cuda ? nvidia_driver_version() : ""},
                      {"backend", backend->describe()}, {"kernels", kernel_family_name(backend_options.kernels)},
                      {"model", dir}, {"layers", c.num_hidden_layers}, {"width", c.hidden_size}, {"batch", batch},
                      {"tokens", encoder.tokens()}, {"runs", runs}, {"ms_median", ms_median},
                      {"ms_min", *std::min_element(ms.begin(), ms.end())}, {"forward_flops", flops}, {"tflops", tflops},
                      {"ceilings", ceilings_json(ceilings)}, {"output_finite", finite}};
    if (ceilings.none.empty()) doc["floor_ms"] = flops / ceilings.gemm_tflops / 1e9;
    write_json(path, doc);
  }
  if (!finite) fail("the text encoder's output is not finite (NaN or inf)");
  return 0;
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
  const double profiled_ms = frame_ms(engine, source, warmup, frames, [&] {
    const std::vector<float> ms = engine.backend().frame_op_ms();
    if (!ms.empty()) profile.add_frame(engine.plan().graph.frame, ms);
  }).median;
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
