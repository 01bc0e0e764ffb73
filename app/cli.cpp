// Flag parsing in two steps: parse_flags() checks that every value has its flag's kind, so "--frames abc"
// fails with the flag named before anything runs; the getters then check ranges, so each command states
// its limits once, where it reads the value.
#include "app/cli.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include <sys/ioctl.h>
#include <unistd.h>

#include "app/controlnet_flags.h"
#include "base/error.h"
#include "pipeline/io/recorder.h"
#include "pipeline/io/source.h"

namespace rtvd::cli {

namespace {

// from_chars over the whole text: no leading '+' or spaces, nothing after the number.
template <class T>
std::optional<T> parse_number(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return std::nullopt;
  }
  return value;
}

std::string kind_expected(ValueKind kind) {
  switch (kind) {
    case ValueKind::Int: return "an integer";
    case ValueKind::Float: return "a number";
    case ValueKind::UInt64: return "a non-negative integer";
    default: return "a value";
  }
}

void check_kind(const FlagSpec& spec, const std::string& value) {
  const bool ok = spec.kind == ValueKind::Int      ? parse_number<long long>(value).has_value()
                  : spec.kind == ValueKind::Float  ? parse_number<double>(value).has_value()
                  : spec.kind == ValueKind::UInt64 ? parse_number<uint64_t>(value).has_value()
                                                   : true;
  if (!ok) fail("flag '--", spec.name, "': expected ", kind_expected(spec.kind), ", got '", value, "'");
}

std::string value_name(const FlagSpec& spec) {
  if (!spec.value_name.empty()) return spec.value_name;
  switch (spec.kind) {
    case ValueKind::None: return "";
    case ValueKind::Int:
    case ValueKind::UInt64: return "N";
    case ValueKind::Float: return "X";
    case ValueKind::String: return "TEXT";
  }
  return "";
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// "in [1, 100]", ">= 1", "< 1", "" (unbounded): what a range allows, in the words of an error message.
std::string range_text(const Range& r) {
  const bool has_min = std::isfinite(r.min), has_max = std::isfinite(r.max);
  if (has_min && has_max)
    return cat("in ", r.min_open ? "(" : "[", number_text(r.min), ", ", number_text(r.max), r.max_open ? ")" : "]");
  if (has_min) return cat(r.min_open ? "> " : ">= ", number_text(r.min));
  if (has_max) return cat(r.max_open ? "< " : "<= ", number_text(r.max));
  return "";
}

bool in_range(double v, const Range& r) {
  return (r.min_open ? v > r.min : v >= r.min) && (r.max_open ? v < r.max : v <= r.max);
}

std::optional<FrameSize> parse_size(const std::string& text) {
  const size_t x = text.find('x');
  const auto w = parse_number<int>(text.substr(0, x));
  const auto h = x == std::string::npos ? w : parse_number<int>(text.substr(x + 1));
  if (!w || !h || *w <= 0 || *h <= 0) return std::nullopt;
  return FrameSize{*w, *h};
}

}  // namespace

int Flags::get_int(const std::string& name, int fallback, int min, int max) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const long long v = parse_number<long long>(it->second).value_or(LLONG_MIN);
  if (v < min || v > max) {
    const Range r{min == INT_MIN ? -INFINITY : double(min), max == INT_MAX ? INFINITY : double(max)};
    fail("flag '--", name, "': expected an integer ", range_text(r), ", got ", it->second);
  }
  return int(v);
}

uint64_t Flags::get_uint64(const std::string& name, uint64_t fallback) const {
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : parse_number<uint64_t>(it->second).value_or(fallback);
}

double Flags::get_float(const std::string& name, double fallback, const Range& range) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const double v = parse_number<double>(it->second).value_or(NAN);
  if (!in_range(v, range)) fail("flag '--", name, "': expected a number ", range_text(range), ", got ", it->second);
  return v;
}

std::string Flags::get_string(const std::string& name, const std::string& fallback) const {
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::vector<std::string> Flags::get_all(const std::string& name) const {
  const auto it = repeated_.find(name);
  return it == repeated_.end() ? std::vector<std::string>{} : it->second;
}

std::string Flags::get_choice(const std::string& name, const std::string& fallback,
                              const std::vector<std::string>& choices) const {
  const std::string v = get_string(name, fallback);
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  fail("flag '--", name, "': expected ", list, ", got '", v, "'");
}

Flags parse_flags(const std::string& command, const std::vector<FlagSpec>& specs,
                  const std::vector<std::string>& args) {
  const std::string see = cat(" for 'rtvd ", command, "' (see rtvd ", command, " --help)");
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      flags.positional_.push_back(arg);
      continue;
    }
    const bool is_long = arg[1] == '-';
    const size_t eq = is_long ? arg.find('=') : std::string::npos;
    const std::string written = arg.substr(0, eq);
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const FlagSpec& s) {
      return is_long ? written == "--" + s.name : written.size() == 2 && s.short_name == written[1];
    });
    if (spec == specs.end()) fail("unknown flag '", written, "'", see);

    std::string value;
    if (spec->kind == ValueKind::None) {
      if (eq != std::string::npos) fail("flag '--", spec->name, "' takes no value");
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];  // taken whatever it looks like, so "--seed -1" reports the value, not a flag
    } else {
      fail("flag '--", spec->name, "' needs a value");
    }
    check_kind(*spec, value);
    flags.values_[spec->name] = value;
    flags.sequence_.push_back({spec->name, value});
    if (spec->repeatable) flags.repeated_[spec->name].push_back(value);
  }
  return flags;
}

namespace {

// Columns a text takes on a terminal: its UTF-8 code points.
size_t columns(const std::string& text) {
  return size_t(std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// The words of text in lines of at most `width` columns, the first continuing a line at column `column`, the
// others indented to `indent`; a word longer than a line overflows it.
std::string wrap_words(const std::string& text, size_t column, size_t indent, size_t width) {
  std::istringstream words(text);
  std::string out, word;
  bool line_start = true;
  while (words >> word) {
    if (!line_start && column + 1 + columns(word) > width) {
      out.append(1, '\n').append(indent, ' ');
      column = indent;
      line_start = true;
    }
    if (!line_start) out += ' ', ++column;
    out += word;
    column += columns(word);
    line_start = false;
  }
  return out;
}

}  // namespace

int help_width() {
  constexpr int kNotATerminal = 100, kNarrowest = 60;
  winsize w{};
  if (!isatty(STDOUT_FILENO) || ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) != 0 || w.ws_col == 0) return kNotATerminal;
  return std::max(int(w.ws_col), kNarrowest);
}

std::string flags_help(const std::vector<FlagSpec>& specs, int width) {
  constexpr size_t kLongest = 22;  // a flag and value name longer than this have a line of their own
  std::vector<std::string> left;
  size_t longest = 0;
  for (const FlagSpec& s : specs) {
    std::string l = s.short_name ? cat("-", s.short_name, ", --", s.name) : "    --" + s.name;
    if (const std::string v = value_name(s); !v.empty()) l += " " + v;
    if (columns(l) <= kLongest) longest = std::max(longest, columns(l));
    left.push_back(std::move(l));
  }
  const size_t description = 2 + longest + 2;  // the column every description starts at
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i) {
    out += "  " + left[i];
    const size_t used = 2 + columns(left[i]);
    if (used + 2 > description) out.append(1, '\n');
    out.append(used + 2 > description ? description : description - used, ' ');
    std::string help = specs[i].help;
    if (!specs[i].default_text.empty()) help += " (default " + specs[i].default_text + ")";
    out += wrap_words(help, description, description, size_t(width)) + "\n";
  }
  return out;
}

const std::vector<FlagSpec>& backend_flags() {
  using K = ValueKind;
  static const std::vector<FlagSpec> specs = {
      {"device", 0, K::String, "where the model runs", "auto", "auto|cpu|cuda"},
      {"threads", 0, K::Int, "CPU threads, 0 = as many as are idle, at most the number of CPUs", "0", ""},
      {"kernels", 0, K::String, "which CUDA kernels run the model", "auto", "auto|custom|cudnn"},
  };
  return specs;
}

const std::vector<FlagSpec>& generation_flags() {
  using K = ValueKind;
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> s = {
      {"size", 0, K::String, "frame size, width x height or square, at most 4096, multiples of 4 for the default model "
       "and 64 for SD models", "the model's size: 64, SD 512 (768-v: 768)", "WxH|N"},
      {"seed", 0, K::UInt64, "random seed: same seed and flags, same frames", "0", ""},
      {"steps", 0, K::Int, cat("denoising steps per frame, 1 to ", kMaxSteps), "4", "K"},
      {"guidance", 0, K::Float, "classifier-free guidance scale, 0 to 30 (as AUTOMATIC1111's web UI: past it frames "
       "only saturate); SD models: off at 1 and below (batch 1)", "3.0", "G"},
      {"strength", 0, K::Float, "how far each source frame is re-noised, 0 to 1 (SD models: the last steps x S steps "
       "run)", "0.6", "S"},
      {"blend", 0, K::Float, "share of the previous frame kept, 0 to below 1", "0.5", "B"},
      {"stream-batch", 0, K::Int, cat("frames in flight per U-Net call (throughput mode): 1, or a multiple of the steps "
       "that run, up to ", kMaxStreamBatch, "; each frame comes out K - 1 frames late"), "1", "K"},
      {"skip-similar", 0, K::Float, "image sources: a frame whose source is at least this similar to the last rendered "
       "one's, above 0 to 1 (e.g. 0.999), is not rendered: the frame before is shown again", "off", "T"},
      {"feature-cache", 0, K::Int, cat("a full U-Net every N frames, only its top level in the frames between (its deep "
       "levels' features cached from the last full frame: faster, approximate), 0 (off) to ", kMaxCacheRefresh),
       "0", "N"},
      {"cache-similarity", 0, K::Float, "with --feature-cache and an image source: a full frame also whenever the "
       "source's similarity to the last full frame's (--skip-similar's measure) falls below this, 0 (the period "
       "alone) to 1", cat(kDefaultCacheSimilarity), "T"},
      {"class", 0, K::String, "class to render, by name or id", "the model's first class", "NAME|ID"},
      {"prompt", 0, K::String, "text to render, for models with a text encoder; over 75 tokens it is cut", "\"\"", "TEXT"},
      {"negative-prompt", 0, K::String, "text guided away from (guidance's unconditional half)", "\"\"", "TEXT"},
      {"prompt-to", 0, K::String, "travel from --prompt to this text over --travel-frames frames", "", "TEXT"},
      {"travel-frames", 0, K::Int, "frames of prompt travel, >= 1", "48", "N"},
      {"clip-skip", 0, K::Int, "text encoder layers skipped from the end (as diffusers' clip_skip)", "0", "N"},
      {"source", 0, K::String, "noise, image:PATH, video:PATH, webcam or webcam:N", "noise", "SPEC"},
      {"model", 0, K::String,
       "a diffusers folder (SD 1.x, 2.x, Turbo, SDXL, SDXL-Turbo), a single-file .safetensors checkpoint (SD "
       "1.x, 2.x, Turbo, SDXL, SDXL-Turbo), or config.json + weights.safetensors", "the embedded model", "PATH"},
      {"vae", 0, K::String, "latent models: the checkpoint's autoencoder (full), TAESD (tiny: a taesd/ folder, "
       "taesdxl/ for SDXL, beside the model or in the cache folder), or a diffusers AutoencoderKL or "
       "AutoencoderTiny folder", "full",
       "full|tiny|DIR"},
      {"sampler", 0, K::String, "latent models: the sampler", "the checkpoint's scheduler", "euler|euler_a|lcm|ddim"},
      {"lora", 0, K::String, "merge a LoRA (diffusers/PEFT or kohya .safetensors) into the weights at load, "
       "scaled; repeatable", "", "FILE[:SCALE]", true},
      {"prediction-type", 0, K::String, "latent models: epsilon or v_prediction, what the U-Net predicts, for "
       "checkpoints that do not say", "the checkpoint's", "TYPE"},
      {"timestep-spacing", 0, K::String, "latent models: where the steps sit in the training schedule (a distilled "
       "few-step model such as SD-Turbo as one file, which brings no scheduler config: trailing)",
       "the checkpoint's scheduler", "leading|trailing|linspace"},
      {"config", 0, K::String, "single-file checkpoints: a diffusers folder whose unet/, vae/ and text_encoder/ "
       "(and SDXL's text_encoder_2/) configs to use instead of inferring them from tensor shapes", "", "DIR"},
    };
    s.insert(s.end(), backend_flags().begin(), backend_flags().end());
    return s;
  }();
  return specs;
}

namespace {

// A command's own flags around the shared generation flags, in help order.
std::vector<FlagSpec> with_generation_flags(std::vector<FlagSpec> before, const std::vector<FlagSpec>& after) {
  before.insert(before.end(), generation_flags().begin(), generation_flags().end());
  before.insert(before.end(), after.begin(), after.end());
  return before;
}

std::optional<FrameSize> get_size(const Flags& flags, const std::string& name) {
  if (!flags.has(name)) return std::nullopt;
  const std::string text = flags.get_string(name, "");
  const auto size = parse_size(text);
  if (!size) fail("flag '--", name, "': expected WxH or N with positive integers, got '", text, "'");
  return size;
}

std::string get_path(const Flags& flags, const std::string& name, const std::string& fallback) {
  const std::string path = flags.get_string(name, fallback);
  if (path.empty() && flags.has(name)) fail("flag '--", name, "': expected a path, got ''");
  return path;
}

bool has_png_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".png";
}

void reject_positionals(const Flags& flags, const std::string& command) {
  if (!flags.positional().empty())
    fail("unexpected argument '", flags.positional().front(), "' for 'rtvd ", command, "' (see rtvd ", command,
         " --help)");
}

}  // namespace

std::vector<FlagSpec> generation_flags(const std::vector<std::string>& names) {
  std::vector<FlagSpec> specs;
  for (const std::string& name : names) {
    const auto spec = std::find_if(generation_flags().begin(), generation_flags().end(),
                                   [&](const FlagSpec& s) { return s.name == name; });
    if (spec == generation_flags().end()) fail("no generation flag '--", name, "'");
    specs.push_back(*spec);
  }
  return specs;
}

void read_backend_flags(const Flags& flags, EngineOptions& o) {
  o.device = device_kind_named(flags.get_choice("device", device_kind_name(o.device), device_kind_names()));
  o.threads = flags.get_int("threads", o.threads, 0);
  // More threads than CPUs only contend (5000 ran 50 s a frame), and libgomp crashes near 100,000.
  const int cpus = int(std::max(1u, std::thread::hardware_concurrency()));
  if (o.threads > cpus)
    fail("flag '--threads': expected at most ", cpus, " (the CPUs of this machine; 0 = as many as are idle), got ", o.threads);
  o.kernels = kernel_family_named(flags.get_choice("kernels", kernel_family_name(o.kernels), kernel_family_names()));
}

void read_model_flags(const Flags& flags, ModelOptions& o) {
  o.path = get_path(flags, "model", o.path);
  if (flags.has("vae")) o.vae = parse_vae_choice(get_path(flags, "vae", ""));
  for (const std::string& spec : flags.get_all("lora")) o.loras.push_back(parse_lora_spec(spec));
  if (flags.has("prediction-type"))
    o.prediction_type = prediction_type_named(flags.get_choice("prediction-type", "", prediction_type_names()));
  if (flags.has("timestep-spacing"))
    o.timestep_spacing = timestep_spacing_named(flags.get_choice("timestep-spacing", "", timestep_spacing_names()));
  o.config = get_path(flags, "config", o.config);
}

void read_generation_flags(const Flags& flags, GenerationOptions& o) {
  if (const auto size = get_size(flags, "size")) {
    if (size->width > kMaxFrameSide || size->height > kMaxFrameSide)
      fail("flag '--size': expected sides of at most ", kMaxFrameSide,
           " (multiples of the model's size multiple: 4 for the default model), got '", flags.get_string("size", ""),
           "'");
    o.engine.width = size->width, o.engine.height = size->height;
  }
  o.frame.seed = flags.get_uint64("seed", o.frame.seed);
  o.frame.steps = flags.get_int("steps", o.frame.steps, 1, kMaxSteps);
  o.frame.guidance = float(flags.get_float("guidance", o.frame.guidance, {.min = 0, .max = kMaxGuidance}));
  o.frame.strength = float(flags.get_float("strength", o.frame.strength, {.min = 0, .max = 1}));
  o.frame.blend = float(flags.get_float("blend", o.frame.blend, {.min = 0, .max = 1, .max_open = true}));
  o.frame.stream_batch = flags.get_int("stream-batch", o.frame.stream_batch, 1, kMaxStreamBatch);
  o.frame.skip_similar = float(flags.get_float("skip-similar", o.frame.skip_similar, {.min = 0, .max = 1, .min_open = true}));
  o.frame.cache_refresh = flags.get_int("feature-cache", o.frame.cache_refresh, 0, kMaxCacheRefresh);
  o.frame.cache_similarity =
      float(flags.get_float("cache-similarity", o.frame.cache_similarity, {.min = 0, .max = 1}));
  if (flags.has("cache-similarity") && o.frame.cache_refresh == 0)
    fail("flag '--cache-similarity': only with --feature-cache N (it says when the cache refreshes early)");
  o.class_name = flags.get_string("class", o.class_name);
  o.prompts.prompt = flags.get_string("prompt", o.prompts.prompt);
  o.prompts.negative_prompt = flags.get_string("negative-prompt", o.prompts.negative_prompt);
  o.prompts.prompt_to = flags.get_string("prompt-to", o.prompts.prompt_to);
  o.prompts.travel_frames = flags.get_int("travel-frames", o.prompts.travel_frames, 1);
  if (flags.has("travel-frames") && !flags.has("prompt-to"))
    fail("flag '--travel-frames': only with --prompt-to (the prompt to travel to)");
  o.engine.clip_skip = flags.get_int("clip-skip", o.engine.clip_skip, 0);
  if (flags.has("source")) o.source = parse_source_spec(flags.get_string("source", ""));
  read_model_flags(flags, o.engine.model);
  if (flags.has("sampler")) o.frame.sampler = sampler_named(flags.get_choice("sampler", "", sampler_names()));
  read_backend_flags(flags, o.engine);
}

const std::vector<FlagSpec>& render_flags() {
  using K = ValueKind;
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> after = controlnet_flags();
    after.insert(after.end(), {
          {"profile", 0, K::String, "time every op: print a table, write the last frame as a Chrome trace (Perfetto)",
           "", "FILE"},
          {"quiet", 'q', K::None, "no progress output", "", ""},
          {"help", 'h', K::None, "show this help", "", ""},
      });
    return with_generation_flags(
      {
          {"output", 'o', K::String, "video file (.mp4 .mkv), directory/ or %05d.png pattern for PNG frames",
           "out/rtvd.mp4", "PATH"},
          {"frames", 'n', K::Int, "frames to render", "48, or the length of a video source", ""},
          {"fps", 0, K::Float, "frame rate of the output, 1 to 240", "a video source's rate, else 24", "F"},
      },
      after);
  }();
  return specs;
}

RenderOptions parse_render_options(const std::vector<std::string>& args) {
  const Flags flags = parse_flags("render", render_flags(), args);
  RenderOptions o;
  if (flags.has("help")) {
    o.help = true;
    return o;
  }
  reject_positionals(flags, "render");
  o.output = get_path(flags, "output", o.output);
  if (flags.has("frames")) o.frames = flags.get_int("frames", kDefaultFrames, 1);
  if (flags.has("fps")) o.fps = flags.get_float("fps", kDefaultFps, {.min = kMinFps, .max = kMaxFps});
  read_generation_flags(flags, o);
  // Flags a render has no use for, which a GUI may use later (it can open a source and record a video).
  if (flags.has("strength") && o.source.kind == SourceKind::Noise)
    fail("flag '--strength': only with an image, video or webcam --source (the noise walk has no frame to re-noise)");
  if (flags.has("skip-similar") && o.source.kind == SourceKind::Noise)
    fail("flag '--skip-similar': only with an image, video or webcam --source (the noise walk has no source to compare)");
  if (flags.has("fps") && is_png_output(o.output))
    fail("flag '--fps': PNG frames have no frame rate (it is for an .mp4 or .mkv output)");
  read_controlnet_flags(flags, o, o.controlnets);
  o.profile_path = flags.get_string("profile", o.profile_path);
  o.quiet = flags.has("quiet");
  return o;
}

const std::vector<FlagSpec>& gui_flags() {
  using K = ValueKind;
  static const std::vector<FlagSpec> specs = with_generation_flags(
      {
          {"frames", 'n', K::Int, "generate N frames, then exit", "run until the window is closed", ""},
          {"screenshot", 0, K::String, "at exit, save the window (frame and panels) as a PNG", "", "FILE.png"},
          {"record", 0, K::String, "start recording at launch: video file, directory/ or %05d.png pattern", "",
           "PATH"},
          {"fps", 0, K::Float, "frame rate of recordings, 1 to 240", "24", "F"},
          {"budget-ms", 0, K::Float, "frame-time budget drawn in the overlay, > 0", "40", "MS"},
          {"window", 0, K::String, cat("window size, width x height or square, from ", gui::kMinWindowWidth, "x",
                                        gui::kMinWindowHeight, " to ", gui::kMaxWindowSide, " per side"), "1280x720",
           "WxH|N"},
          {"filter", 0, K::String, "how the frame is scaled to the window", "linear", "linear|nearest"},
          {"no-vsync", 0, K::None, "present without waiting for the display's refresh", "", ""},
      },
      [] {
        std::vector<FlagSpec> after = controlnet_flags();
        after.push_back({"help", 'h', K::None, "show this help", "", ""});
        return after;
      }());
  return specs;
}

GuiOptions parse_gui_options(const std::vector<std::string>& args) {
  const Flags flags = parse_flags("gui", gui_flags(), args);
  GuiOptions o;
  if (flags.has("help")) {
    o.help = true;
    return o;
  }
  reject_positionals(flags, "gui");
  if (flags.has("frames")) o.frames = flags.get_int("frames", 1, 1);
  o.screenshot = get_path(flags, "screenshot", o.screenshot);
  if (!o.screenshot.empty() && !has_png_extension(o.screenshot))
    fail("flag '--screenshot': expected a .png file (screenshots are written as PNG), got '", o.screenshot, "'");
  o.record = get_path(flags, "record", o.record);
  o.fps = flags.get_float("fps", o.fps, {.min = kMinFps, .max = kMaxFps});
  o.budget_ms = flags.get_float("budget-ms", o.budget_ms, {.min = 0, .min_open = true});
  if (const auto window = get_size(flags, "window")) {
    if (window->width > gui::kMaxWindowSide || window->height > gui::kMaxWindowSide)
      fail("flag '--window': expected at most ", gui::kMaxWindowSide, " per side, got '", flags.get_string("window", ""),
           "'");
    if (window->width < gui::kMinWindowWidth || window->height < gui::kMinWindowHeight)
      fail("flag '--window': expected at least ", gui::kMinWindowWidth, "x", gui::kMinWindowHeight,
           " (the panels' labels need it), got '", flags.get_string("window", ""), "'");
    o.window = *window;
  }
  if (flags.has("filter")) o.linear_filter = flags.get_choice("filter", "", {"linear", "nearest"}) == "linear";
  o.vsync = !flags.has("no-vsync");
  read_generation_flags(flags, o);
  read_controlnet_flags(flags, o, o.controlnets);
  return o;
}

}  // namespace rtvd::cli
