// rtvd bench unet: one U-Net forward alone (SD-class configs), its time to first output and memory.
// rtvd bench text: one CLIP text encoder forward alone (77 tokens), from a model's text_encoder/ folder.
// rtvd bench kernels: every op at its production cases (bench/kernel_bench.h).
#include "bench_components.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "bench_report.h"
#include "build_config.h"
#include "cli.h"
#include "pipeline/device.h"
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

}  // namespace

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

}  // namespace rtvd
