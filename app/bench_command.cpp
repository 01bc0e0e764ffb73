// rtvd bench frames: end-to-end frame rate of the engine (no recording), median over many frames after
// warm-up, the per-op profile against ceilings measured in the same run, and the profiler's overhead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "build_config.h"
#include "cli.h"
#include "commands.h"
#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "pipeline/error.h"
#if RTVD_HAS_CUDA
#include "pipeline/cuda/kernel_bench.h"
#endif

namespace rtvd {

namespace {

const std::vector<cli::FlagSpec>& bench_flags() {
  using K = cli::ValueKind;
  static const std::vector<cli::FlagSpec> specs = {
      {"frames", 'n', K::Int, "timed frames per measurement", "200", "N"},
      {"size", 0, K::Int, "square frame size", "the model's sample size", "N"},
      {"steps", 0, K::Int, "denoising steps per frame", "4", "K"},
      {"model", 0, K::String, "model directory", "embedded", "DIR"},
      {"device", 0, K::String, "auto, cpu or cuda", "auto", "D"},
      {"threads", 0, K::Int, "CPU threads, 0 = all cores", "0", ""},
      {"kernels", 0, K::String, "auto, custom or cudnn", "auto", "K"},
      {"json", 0, K::String, "write the results as JSON", "", "FILE"},
      {"help", 'h', K::None, "show this help", "", ""},
  };
  return specs;
}

// Median milliseconds per frame over `frames` frames, after `warmup` untimed ones; after_frame runs
// outside the timed region.
template <class F>
double median_frame_ms(Engine& engine, int warmup, int frames, F&& after_frame) {
  for (int i = 0; i < warmup; ++i) engine.render(nullptr);
  std::vector<double> ms;
  for (int i = 0; i < frames; ++i) {
    const auto s = std::chrono::steady_clock::now();
    engine.render(nullptr);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    after_frame();
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
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

int bench_kernels_command(const std::vector<std::string>& args) {
  using K = cli::ValueKind;
  static const std::vector<cli::FlagSpec> specs = {
      {"runs", 0, K::Int, "timed runs per case (the median is reported)", "50", "N"},
      {"json", 0, K::String, "write the results as JSON", "", "FILE"},
      {"help", 'h', K::None, "show this help", "", ""},
  };
  const cli::Flags flags = cli::parse_flags("bench kernels", specs, args);
  if (flags.has("help")) {
    std::printf("usage: rtvd bench kernels [flags]\n\nEach CUDA kernel and its cuDNN/cuBLAS alternative at production shapes.\n\n%s",
                cli::flags_help(specs).c_str());
    return 0;
  }
  std::string why_not;
  const auto gpus = cuda_devices(&why_not);
  if (gpus.empty()) fail("rtvd bench kernels needs a CUDA device: ", why_not);
#if RTVD_HAS_CUDA
  nlohmann::json doc = bench_kernels(gpus.front(), flags.get_int("runs", 50, 3, 100000));
  doc["bench"] = "kernels";
  doc["date"] = utc_now();
  if (const std::string path = flags.get_string("json", ""); !path.empty()) write_json(path, doc);
#endif
  return 0;
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "kernels") return bench_kernels_command({args.begin() + 1, args.end()});
  if (args.empty() || args[0] != "frames")
    fail("rtvd bench: expected a benchmark name: frames or kernels (see rtvd bench frames --help)");
  const cli::Flags flags = cli::parse_flags("bench frames", bench_flags(), {args.begin() + 1, args.end()});
  if (flags.has("help")) {
    std::printf("usage: rtvd bench frames [flags]\n\nEnd-to-end frames per second of the engine, without recording.\n\n%s",
                cli::flags_help(bench_flags()).c_str());
    return 0;
  }
  EngineOptions eo;
  eo.model_dir = flags.get_string("model", "");
  eo.device = flags.get_choice("device", "auto", {"auto", "cpu", "cuda"});
  eo.threads = flags.get_int("threads", 0, 0, 1024);
  eo.kernels = flags.get_choice("kernels", "auto", {"auto", "custom", "cudnn"});
  eo.width = eo.height = flags.get_int("size", 0, 0, 4096);
  const int frames = flags.get_int("frames", 200, 3, 1000000);
  Engine engine(eo);
  FrameSettings s;
  s.steps = flags.get_int("steps", 4, 1, 100);
  engine.configure(s, false);
  const int warmup = std::max(3, frames / 10);

  const double plain_ms = median_frame_ms(engine, warmup, frames, [] {});
  engine.backend().set_profiling(true);
  FrameProfile profile;
  const double profiled_ms = median_frame_ms(engine, warmup, frames, [&] {
    const std::vector<float> ms = engine.backend().frame_op_ms();
    if (!ms.empty()) profile.add_frame(engine.plan().graph.frame, ms);
  });
  engine.backend().set_profiling(false);
  const Ceilings ceilings = engine.backend().measure_ceilings();

  std::printf("%s\nmodel %s, %dx%d, %d steps, batch %d\n", engine.backend().describe().c_str(), engine.config().name.c_str(),
              engine.width(), engine.height(), s.steps, engine.plan().batch);
  std::printf("frame: %.3f ms median over %d frames = %.1f frames/s (including the RGBA8 read-back)\n", plain_ms, frames,
              1e3 / plain_ms);
  std::printf("with per-op profiling: %.3f ms (overhead %.1f%%)\n\n%s", profiled_ms, 100.0 * (profiled_ms / plain_ms - 1.0),
              profile.table(ceilings).c_str());

  if (const std::string path = flags.get_string("json", ""); !path.empty()) {
    nlohmann::json ops = nlohmann::json::array();
    for (const OpTypeRow& r : profile.by_type())
      ops.push_back({{"op", r.type}, {"calls", r.calls}, {"ms", r.ms}, {"flops", r.flops}, {"bytes", r.bytes}});
    const nlohmann::json doc = {
        {"bench", "frames"}, {"date", utc_now()}, {"backend", engine.backend().describe()},
        {"model", engine.config().name}, {"width", engine.width()}, {"height", engine.height()}, {"steps", s.steps},
        {"batch", engine.plan().batch}, {"frames", frames}, {"frame_ms_median", plain_ms},
        {"frames_per_second", 1e3 / plain_ms}, {"profiled_frame_ms_median", profiled_ms},
        {"profiler_overhead_percent", 100.0 * (profiled_ms / plain_ms - 1.0)},
        {"ceilings", {{"gemm_tflops", ceilings.gemm_tflops}, {"gemm", ceilings.gemm_what},
                      {"copy_gbps", ceilings.copy_gbps}, {"copy", ceilings.copy_what}}},
        {"ops_per_frame", ops}};
    write_json(path, doc);
  }
  return 0;
}

}  // namespace rtvd
