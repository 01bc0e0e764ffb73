// rtvd info: what this build can do, which devices it sees, and the model it would run.
#include <cstdio>
#include <map>
#include <thread>

#include "base/error.h"
#include "build_config.h"
#include "cli.h"
#include "commands.h"
#include "pipeline/device.h"
#include "pipeline/engine.h"

namespace rtvd {

namespace {

// render's --model and --device, read as render reads them.
const std::vector<cli::FlagSpec>& info_flags() {
  using K = cli::ValueKind;
  static const std::vector<cli::FlagSpec> specs = [] {
    std::vector<cli::FlagSpec> s =
        cli::generation_flags({"model", "vae", "lora", "prediction-type", "timestep-spacing", "config", "size", "steps",
                               "guidance", "sampler", "device"});
    s.push_back({"controlnet", 0, K::String, "latent models: a ControlNet to load beside the model and list; "
                 "repeatable", "", "PATH", true});
    s.push_back({"help", 'h', K::None, "show this help", "", ""});
    return s;
  }();
  return specs;
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

// Every component's parameters (the elements of its tensors), summed, then each with its modules.
void print_parameters(const std::vector<ModelComponent>& components) {
  int64_t total = 0;
  std::string sum;
  for (const ModelComponent& k : components) {
    total += k.parameters;
    sum += cat(sum.empty() ? "" : " + ", k.name, " ", k.parameters);
  }
  std::printf("  parameters   %lld%s\n", (long long)total, components.size() > 1 ? (" = " + sum).c_str() : "");
  for (const ModelComponent& k : components) {
    std::printf("    %-22s %11lld  %s, %s\n", k.name.c_str(), (long long)k.parameters, k.dtypes.c_str(), k.source.c_str());
    for (const auto& [module, n] : k.modules) std::printf("      %-20s %11lld\n", module.c_str(), (long long)n);
  }
}

}  // namespace

int info_command(const std::vector<std::string>& args) {
  const cli::Flags flags = cli::parse_flags("info", info_flags(), args);
  if (flags.has("help")) {
    std::printf("usage: rtvd info [flags]\n\n%s", cli::flags_help(info_flags()).c_str());
    return 0;
  }
  if (!flags.positional().empty())
    fail("unexpected argument '", flags.positional().front(), "' for 'rtvd info' (see rtvd info --help)");
  GenerationOptions o;
  cli::read_generation_flags(flags, o);
  for (const std::string& path : flags.get_all("controlnet")) {
    if (path.empty()) fail("flag '--controlnet': expected a path, got ''");
    o.engine.model.controlnets.push_back(path);
  }
  // The model and the backend before any output: a bad --model or an unusable --device is the one line printed.
  Engine engine(o.engine);
  engine.configure(frame_settings(o, engine), false);  // the plan a render with these flags runs
  std::printf("rtvd %s\n", RTVD_VERSION);
  std::printf("build:   CUDA backend %s, MP4/MKV recording (FFmpeg) %s, video/webcam sources (OpenCV) %s, GUI %s\n",
              RTVD_HAS_CUDA ? "yes (architectures " RTVD_CUDA_ARCHITECTURES ")" : "no", yes_no(RTVD_HAS_LIBAV).c_str(),
              yes_no(RTVD_HAS_OPENCV).c_str(), yes_no(RTVD_HAS_GUI).c_str());
  std::printf("cpu:     %u hardware threads\n", std::thread::hardware_concurrency());
  std::string why_not;
  const auto gpus = cuda_devices(&why_not);
  if (gpus.empty()) std::printf("cuda:    none (%s)\n", why_not.c_str());
  for (const GpuInfo& g : gpus)
    std::printf("cuda:    #%d %s, sm_%d, %.1f GiB\n", g.index, g.name.c_str(), g.sm, g.memory_bytes / 1073741824.0);

  const ModelConfig& c = engine.config();
  const Model& m = engine.model();
  std::printf("\nmodel:   %s (%s, %s)\n", c.name.c_str(), m.source.c_str(), m.format.c_str());
  if (m.latent()) {
    const SchedulerConfig& sc = *m.scheduler;
    const FrameSettings& s = engine.settings();
    std::printf("  scheduler    %s: %s prediction, %s spacing; sampler %s%s\n", sc.class_name.c_str(),
                prediction_type_name(sc.prediction), sc.timestep_spacing ? timestep_spacing_name(*sc.timestep_spacing) : "default",
                sampler_name(sc.sampler_for(s.sampler)), s.sampler ? " (--sampler)" : " (the scheduler's)");
    const LatentSpace& l = m.autoencoder->latent();
    std::printf("  autoencoder  %s, %d latent channels, one per %dx%d pixels, scaling factor %g\n",
                m.autoencoder->tiny() ? (m.sdxl() ? "AutoencoderTiny (TAESDXL)" : "AutoencoderTiny (TAESD)") : "AutoencoderKL", l.channels, l.pixels_per_latent,
                l.pixels_per_latent, l.scaling_factor);
  }
  std::printf("  frame        %dx%dx%d (multiples of %d)%s\n", m.native_size(), m.native_size(), m.image_channels(),
              m.size_multiple(), m.latent() ? cat(", latents ", c.sample_size, "x", c.sample_size, "x", c.in_channels).c_str() : "");
  std::string channels;
  for (size_t i = 0; i < c.block_out_channels.size(); ++i) {
    if (i) channels += '/';
    channels += std::to_string(c.block_out_channels[i]);
    if (c.attention_levels[i]) channels += "+attn";
  }
  std::printf("  levels       %s, %d ResNets per level, %s norm%s\n", channels.c_str(), c.layers_per_block,
              c.norm == NormKind::Batch ? "batch (conv-BN-SiLU, FiLM)" : "group", c.mid_attention ? ", mid attention" : "");
  if (c.num_class_embeds > 0) {
    std::printf("  classes      %d + null: %s\n", c.num_class_embeds - 1, class_names_text(c).c_str());
  }
  if (c.cross_attention_dim > 0) std::printf("  context      %dx%d\n", c.context_length, c.cross_attention_dim);
  if (c.text_time())  // SDXL: text_encoder and text_encoder_2 side by side, the second's pooled projection too
    std::printf("  added        pooled text %d + 6 time ids x %d (SDXL's text_time)\n", c.text_embeds_dim(),
                c.addition_time_embed_dim);
  for (size_t k = 0; k < m.controlnets.size(); ++k) {
    const ControlNetConfig& net = m.controlnets[k].config;
    std::string embedding;
    for (int e : net.conditioning_embedding_out_channels) {
      if (!embedding.empty()) embedding += '/';
      embedding += std::to_string(e);
    }
    std::printf("  controlnet.%zu %s (%s): control image %d channels at the frame's size, conditioning embedding "
                "%s\n", k, m.controlnets[k].source.c_str(), m.controlnets[k].format.c_str(), net.conditioning_channels,
                embedding.c_str());
  }
  print_parameters(m.components);
  std::printf("backend: %s\n", engine.backend().describe().c_str());
  std::printf("  memory       weights %.1f MiB, activations %.1f MiB, workspace %.1f MiB at %dx%d, batch %d\n",
              engine.backend().weight_bytes() / 1048576.0, engine.backend().arena_bytes() / 1048576.0,
              engine.backend().workspace_bytes() / 1048576.0, engine.width(), engine.height(), engine.plan().batch);
  std::printf("  ops/frame    %zu (%d steps), setup ops %zu\n", engine.plan().graph.frame.size(),
              engine.settings().steps, engine.plan().graph.setup.size());
  return 0;
}

}  // namespace rtvd
