// The flag parser and the render command's options: every default, both value syntaxes, and each error
// message word for word (they are what a user reads); through the binary, the commands' usage and argument
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// app/ is compiled into the rtvd executable only, so the test compiles the parser itself.
#include "app/cli.h"
#include "base/error.h"
#include "support/process.h"
#include "support/test_util.h"

namespace rtvd::cli {
namespace {

using Args = std::vector<std::string>;

std::string error_of(const Args& args) {
  try {
    parse_render_options(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Cli, DefaultsWhenNoFlagsAreGiven) {
  const RenderOptions o = parse_render_options({});
  EXPECT_EQ(o.output, "out/rtvd.mp4");
  EXPECT_FALSE(o.frames.has_value());
  EXPECT_EQ(o.fps, std::nullopt);  // render takes a video source's rate, else cli::kDefaultFps (24)
  EXPECT_EQ(o.engine.width, 0);
  EXPECT_EQ(o.engine.height, 0);
  EXPECT_EQ(o.frame.seed, 0u);
  EXPECT_EQ(o.frame.steps, 4);
  EXPECT_EQ(o.frame.guidance, 3.0f);
  EXPECT_EQ(o.frame.strength, 0.6f);
  EXPECT_EQ(o.frame.blend, 0.5f);
  EXPECT_EQ(o.class_name, "");
  EXPECT_EQ(o.source, SourceSpec{});  // the noise walk
  EXPECT_EQ(o.engine.model.path, "");
  EXPECT_EQ(o.engine.device, DeviceKind::Auto);
  EXPECT_EQ(o.engine.threads, 0);
  EXPECT_EQ(o.engine.kernels, KernelFamily::Auto);
  EXPECT_EQ(o.profile_path, "");
  EXPECT_FALSE(o.quiet);
  EXPECT_FALSE(o.help);
}

TEST(Cli, ReadsEveryFlagInBothSyntaxes) {
  const RenderOptions o = parse_render_options(
      {"-o", "a/b.mp4", "-n", "7", "--fps=12.5", "--size", "96x64", "--seed", "18446744073709551615",
       "--steps=2", "--guidance", "0", "--strength", "1", "--blend=0", "--class", "cat", "--source",
       "video:x.mp4", "--model=m/", "--device", "cpu", "--threads", "1", "--kernels=cudnn", "--profile",
       "p.json", "-q"});
  EXPECT_EQ(o.output, "a/b.mp4");
  EXPECT_EQ(o.frames, 7);
  EXPECT_EQ(o.fps, 12.5);
  EXPECT_EQ(o.engine.width, 96);
  EXPECT_EQ(o.engine.height, 64);
  EXPECT_EQ(o.frame.seed, 18446744073709551615u);
  EXPECT_EQ(o.frame.steps, 2);
  EXPECT_EQ(o.frame.guidance, 0.0f);
  EXPECT_EQ(o.frame.strength, 1.0f);
  EXPECT_EQ(o.frame.blend, 0.0f);
  EXPECT_EQ(o.class_name, "cat");
  EXPECT_EQ(o.source, (SourceSpec{SourceKind::Video, "x.mp4", 0}));
  EXPECT_EQ(o.engine.model.path, "m/");
  EXPECT_EQ(o.engine.device, DeviceKind::Cpu);
  EXPECT_EQ(o.engine.threads, 1);  // at most the CPUs of any machine
  EXPECT_EQ(o.engine.kernels, KernelFamily::Cudnn);
  EXPECT_EQ(o.profile_path, "p.json");
  EXPECT_TRUE(o.quiet);
}

TEST(Cli, ReadsThePromptFlags) {
  const RenderOptions o = parse_render_options({"--prompt", "a fox, watercolor", "--negative-prompt=blurry",
                                                "--prompt-to", "an owl", "--travel-frames", "96", "--clip-skip", "2"});
  EXPECT_EQ(o.prompts.prompt, "a fox, watercolor");
  EXPECT_EQ(o.prompts.negative_prompt, "blurry");
  EXPECT_EQ(o.prompts.prompt_to, "an owl");
  EXPECT_EQ(o.prompts.travel_frames, 96);
  EXPECT_EQ(o.engine.clip_skip, 2);
  const RenderOptions d = parse_render_options({});
  EXPECT_FALSE(d.prompts.any());
  EXPECT_EQ(d.engine.clip_skip, 0);
  EXPECT_EQ(error_of({"--travel-frames", "10"}), "flag '--travel-frames': only with --prompt-to (the prompt to travel to)");
  EXPECT_EQ(error_of({"--prompt-to", "b", "--travel-frames", "0"}), "flag '--travel-frames': expected an integer >= 1, got 0");
  EXPECT_EQ(error_of({"--clip-skip", "-1"}), "flag '--clip-skip': expected an integer >= 0, got -1");
}

// --feature-cache N: off by default, 0 to 100 (the engine's bound, kMaxCacheRefresh), else one line naming it.
TEST(Cli, ReadsTheFeatureCacheFlag) {
  EXPECT_EQ(parse_render_options({}).frame.cache_refresh, 0);
  EXPECT_EQ(parse_render_options({"--feature-cache", "3"}).frame.cache_refresh, 3);
  EXPECT_EQ(parse_render_options({"--feature-cache=100"}).frame.cache_refresh, kMaxCacheRefresh);
  for (const std::string bad : {"-1", "101"})
    EXPECT_EQ(error_of({"--feature-cache", bad}), "flag '--feature-cache': expected an integer in [0, 100], got " + bad);
  for (const std::string bad : {"2.5", "x", ""})
    EXPECT_EQ(error_of({"--feature-cache", bad}), "flag '--feature-cache': expected an integer, got '" + bad + "'");
  // --cache-similarity T: the early refresh's threshold, 0 to 1, only beside --feature-cache.
  EXPECT_EQ(parse_render_options({"--feature-cache", "3"}).frame.cache_similarity, kDefaultCacheSimilarity);
  EXPECT_EQ(parse_render_options({"--feature-cache", "3", "--cache-similarity", "0.5"}).frame.cache_similarity, 0.5f);
  EXPECT_EQ(parse_render_options({"--feature-cache", "3", "--cache-similarity", "0"}).frame.cache_similarity, 0.0f);
  EXPECT_EQ(error_of({"--feature-cache", "3", "--cache-similarity", "1.5"}),
            "flag '--cache-similarity': expected a number in [0, 1], got 1.5");
  EXPECT_EQ(error_of({"--cache-similarity", "0.5"}),
            "flag '--cache-similarity': only with --feature-cache N (it says when the cache refreshes early)");
}

// The latent models' flags: --lora repeats (each FILE[:SCALE] kept in order), the others are single values.
TEST(Cli, ReadsTheModelFlags) {
  const RenderOptions o = parse_render_options({"--model", "sd.safetensors", "--vae", "tiny", "--sampler", "lcm",
                                                "--lora", "a.safetensors:0.5", "--lora=b.safetensors",
                                                "--prediction-type", "v_prediction", "--timestep-spacing", "trailing",
                                                "--config", "cfg/"});
  EXPECT_EQ(o.engine.model.path, "sd.safetensors");
  EXPECT_EQ(o.engine.model.vae, VaeChoice{VaeChoice::Kind::Tiny});
  ASSERT_EQ(o.engine.model.loras.size(), 2u);
  EXPECT_EQ(o.engine.model.loras[0].path, "a.safetensors");
  EXPECT_FLOAT_EQ(o.engine.model.loras[0].scale, 0.5f);
  EXPECT_EQ(o.engine.model.loras[1].path, "b.safetensors");
  EXPECT_FLOAT_EQ(o.engine.model.loras[1].scale, 1.0f);
  EXPECT_EQ(o.engine.model.prediction_type, PredictionType::VPrediction);
  EXPECT_EQ(o.engine.model.timestep_spacing, TimestepSpacing::Trailing);
  EXPECT_EQ(o.engine.model.config, "cfg/");
  EXPECT_EQ(o.frame.sampler, SamplerKind::Lcm);
  const RenderOptions d = parse_render_options({});
  EXPECT_FALSE(d.frame.sampler.has_value()) << "the checkpoint's scheduler decides";
  EXPECT_TRUE(d.engine.model.loras.empty());
  EXPECT_FALSE(d.engine.model.vae.has_value()) << "the checkpoint's";
  EXPECT_FALSE(d.engine.model.prediction_type.has_value()) << "the checkpoint's";
  EXPECT_FALSE(d.engine.model.timestep_spacing.has_value()) << "the checkpoint's";
  EXPECT_EQ(error_of({"--sampler", "heun"}), "flag '--sampler': expected euler, euler_a, lcm or ddim, got 'heun'");
  EXPECT_EQ(parse_render_options({"--sampler", "euler_a"}).frame.sampler, SamplerKind::EulerAncestral);
  EXPECT_EQ(error_of({"--prediction-type", "sample"}),
            "flag '--prediction-type': expected epsilon or v_prediction, got 'sample'");
  EXPECT_EQ(error_of({"--timestep-spacing", "middle"}),
            "flag '--timestep-spacing': expected leading, trailing or linspace, got 'middle'");
  EXPECT_EQ(error_of({"--vae", ""}), "flag '--vae': expected a path, got ''");
}

// Every value each typed model flag takes, as its type: nothing past the command line reads the text again.
TEST(Cli, TypedModelFlagsTakeEachValue) {
  const auto model = [](const Args& args) { return parse_render_options(args).engine.model; };
  EXPECT_EQ(model({"--vae", "full"}).vae, VaeChoice{VaeChoice::Kind::Full});
  EXPECT_EQ(model({"--vae", "tiny"}).vae, VaeChoice{VaeChoice::Kind::Tiny});
  EXPECT_EQ(model({"--vae", "my vae/"}).vae, (VaeChoice{VaeChoice::Kind::Folder, "my vae/"}));
  EXPECT_EQ(model({"--vae=./tiny"}).vae, (VaeChoice{VaeChoice::Kind::Folder, "./tiny"})) << "a folder named tiny";
  EXPECT_EQ(model({"--prediction-type", "epsilon"}).prediction_type, PredictionType::Epsilon);
  EXPECT_EQ(model({"--prediction-type", "v_prediction"}).prediction_type, PredictionType::VPrediction);
  EXPECT_EQ(model({"--timestep-spacing", "leading"}).timestep_spacing, TimestepSpacing::Leading);
  EXPECT_EQ(model({"--timestep-spacing", "trailing"}).timestep_spacing, TimestepSpacing::Trailing);
  EXPECT_EQ(model({"--timestep-spacing", "linspace"}).timestep_spacing, TimestepSpacing::Linspace);
  EXPECT_EQ(error_of({"--prediction-type", "v"}), "flag '--prediction-type': expected epsilon or v_prediction, got 'v'");
  EXPECT_EQ(error_of({"--prediction-type", "Epsilon"}),
            "flag '--prediction-type': expected epsilon or v_prediction, got 'Epsilon'");
  EXPECT_EQ(error_of({"--timestep-spacing", ""}), "flag '--timestep-spacing': expected leading, trailing or linspace, got ''");
  EXPECT_EQ(test::error_of([] { parse_vae_choice(""); }), "--vae: expected full, tiny or a folder, got an empty value");
  for (const auto& [text, kind] : std::vector<std::pair<std::string, SourceKind>>{
           {"noise", SourceKind::Noise}, {"image:a.png", SourceKind::Image}, {"video:b.mkv", SourceKind::Video},
           {"webcam", SourceKind::Webcam}, {"webcam:3", SourceKind::Webcam}})
    EXPECT_EQ(parse_render_options({"--source", text}).source.kind, kind) << text;
  EXPECT_EQ(parse_render_options({"--source", "webcam:3"}).source.webcam, 3);
  EXPECT_EQ(parse_render_options({"--source", "image:a.png"}).source.path, "a.png");
}

// The library has no string form of these options any more: a flag's text cannot reach it unparsed.
static_assert(std::is_same_v<decltype(ModelOptions::vae), std::optional<VaeChoice>>);
static_assert(std::is_same_v<decltype(ModelOptions::prediction_type), std::optional<PredictionType>>);
static_assert(std::is_same_v<decltype(ModelOptions::timestep_spacing), std::optional<TimestepSpacing>>);
static_assert(std::is_same_v<decltype(GenerationOptions::source), SourceSpec>);
static_assert(!std::is_assignable_v<std::optional<VaeChoice>&, std::string>);
static_assert(!std::is_assignable_v<std::optional<PredictionType>&, std::string>);
static_assert(!std::is_assignable_v<std::optional<TimestepSpacing>&, std::string>);
static_assert(!std::is_assignable_v<SourceSpec&, std::string>);
static_assert(!std::is_invocable_v<decltype(&open_source), std::string>);

// A malformed --source is refused with the flags, before a model loads (the GUI loaded the model first).
TEST(Cli, MalformedSourceSpecsAreFlagErrors) {
  const std::string kinds = "expected noise, image:PATH, video:PATH, webcam or webcam:N";
  for (const std::string bad : {"noisy", "noise:1", "Noise", "", "webcam0", ":x", "image=a.png"})
    EXPECT_EQ(error_of({"--source", bad}), "flag '--source': " + kinds + ", got '" + bad + "'");
  for (const std::string kind : {"image", "video"})
    for (const std::string bad : {kind, kind + ":"})
      EXPECT_EQ(error_of({"--source", bad}), "flag '--source': expected " + kind + ":PATH, got '" + bad + "'");
  for (const std::string bad : {"webcam:", "webcam:x", "webcam:-1", "webcam:1x", "webcam:+1", "webcam:99999999999"})
    EXPECT_EQ(error_of({"--source", bad}),
              "flag '--source': expected webcam:N with N a device number, e.g. webcam:0, got '" + bad + "'");
}

TEST(Cli, SquareSizeAndLastRepeatWins) {
  const RenderOptions o = parse_render_options({"--size", "48", "--frames", "3", "--frames=9"});
  EXPECT_EQ(o.engine.width, 48);
  EXPECT_EQ(o.engine.height, 48);
  EXPECT_EQ(o.frames, 9);
}

TEST(Cli, HelpIsReportedBeforeValuesAreChecked) {
  EXPECT_TRUE(parse_render_options({"--frames", "-1", "-h"}).help);
  EXPECT_TRUE(parse_render_options({"--help"}).help);
}

TEST(Cli, SyntaxErrors) {
  EXPECT_EQ(error_of({"--x"}), "unknown flag '--x' for 'rtvd render' (see rtvd render --help)");
  EXPECT_EQ(error_of({"--x=3"}), "unknown flag '--x' for 'rtvd render' (see rtvd render --help)");
  EXPECT_EQ(error_of({"-z"}), "unknown flag '-z' for 'rtvd render' (see rtvd render --help)");
  EXPECT_EQ(error_of({"--fps", "10", "--frames"}), "flag '--frames' needs a value");
  EXPECT_EQ(error_of({"-n"}), "flag '--frames' needs a value");
  EXPECT_EQ(error_of({"--quiet=yes"}), "flag '--quiet' takes no value");
  EXPECT_EQ(error_of({"render.mp4"}), "unexpected argument 'render.mp4' for 'rtvd render' (see rtvd render --help)");
}

TEST(Cli, ValuesOfTheWrongKind) {
  EXPECT_EQ(error_of({"--frames", "abc"}), "flag '--frames': expected an integer, got 'abc'");
  EXPECT_EQ(error_of({"--frames=1.5"}), "flag '--frames': expected an integer, got '1.5'");
  EXPECT_EQ(error_of({"--frames="}), "flag '--frames': expected an integer, got ''");
  EXPECT_EQ(error_of({"--frames", " 3"}), "flag '--frames': expected an integer, got ' 3'");
  EXPECT_EQ(error_of({"--fps", "fast"}), "flag '--fps': expected a number, got 'fast'");
  EXPECT_EQ(error_of({"--fps", "inf"}), "flag '--fps': expected a number, got 'inf'");
  EXPECT_EQ(error_of({"--fps", "nan"}), "flag '--fps': expected a number, got 'nan'");
  EXPECT_EQ(error_of({"--seed", "-1"}), "flag '--seed': expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_of({"--seed", "18446744073709551616"}),
            "flag '--seed': expected a non-negative integer, got '18446744073709551616'");
}

TEST(Cli, ValuesOutOfRange) {
  EXPECT_EQ(error_of({"--frames", "-3"}), "flag '--frames': expected an integer >= 1, got -3");
  EXPECT_EQ(error_of({"-n", "0"}), "flag '--frames': expected an integer >= 1, got 0");
  EXPECT_EQ(error_of({"--frames", "99999999999"}), "flag '--frames': expected an integer >= 1, got 99999999999");
  EXPECT_EQ(error_of({"--fps", "0"}), "flag '--fps': expected a number in [1, 240], got 0");
  EXPECT_EQ(error_of({"--fps=-24"}), "flag '--fps': expected a number in [1, 240], got -24");
  EXPECT_EQ(error_of({"--steps", "0"}), "flag '--steps': expected an integer in [1, 100], got 0");
  EXPECT_EQ(error_of({"--steps", "101"}), "flag '--steps': expected an integer in [1, 100], got 101");
  EXPECT_EQ(error_of({"--guidance", "-0.5"}), "flag '--guidance': expected a number in [0, 30], got -0.5");
  // A scale past any a user means: 1e20 made every frame NaN, shown and recorded as black.
  EXPECT_EQ(error_of({"--guidance", "1e20"}), "flag '--guidance': expected a number in [0, 30], got 1e20");
  EXPECT_EQ(error_of({"--guidance", "30.01"}), "flag '--guidance': expected a number in [0, 30], got 30.01");
  EXPECT_EQ(parse_render_options({"--guidance", "30"}).frame.guidance, 30.0f);
  EXPECT_EQ(error_of({"--strength", "1.5"}), "flag '--strength': expected a number in [0, 1], got 1.5");
  EXPECT_EQ(error_of({"--strength", "-0.1"}), "flag '--strength': expected a number in [0, 1], got -0.1");
  EXPECT_EQ(error_of({"--blend", "1"}), "flag '--blend': expected a number in [0, 1), got 1");
  for (const std::string bad : {"0", "-0.5", "1.001"})
    EXPECT_EQ(error_of({"--source", "image:x.png", "--skip-similar", bad}),
              "flag '--skip-similar': expected a number in (0, 1], got " + bad);
  EXPECT_EQ(parse_render_options({"--source", "image:x.png", "--skip-similar", "1"}).frame.skip_similar, 1.0f);
  EXPECT_EQ(parse_render_options({"--source", "video:x.mp4", "--skip-similar", "0.999"}).frame.skip_similar, 0.999f);
  EXPECT_EQ(parse_render_options({"--source", "video:x.mp4"}).frame.skip_similar, 0.0f) << "off by default";
  EXPECT_EQ(error_of({"--threads", "-2"}), "flag '--threads': expected an integer >= 0, got -2");
  EXPECT_EQ(error_of({"--device", "gpu"}), "flag '--device': expected auto, cpu or cuda, got 'gpu'");
  EXPECT_EQ(error_of({"--kernels", "fast"}), "flag '--kernels': expected auto, custom or cudnn, got 'fast'");
  EXPECT_EQ(error_of({"-o", ""}), "flag '--output': expected a path, got ''");
  for (const std::string bad : {"0", "0x5", "5x0", "-8", "64x", "x64", "64x64x3", "big", "64X64"})
    EXPECT_EQ(error_of({"--size", bad}), "flag '--size': expected WxH or N with positive integers, got '" + bad + "'");
}

// --threads 100000 segfaulted in libgomp and 5000 ran 50 s a frame; --size 1000000x4 allocated 5.8 GB.
TEST(Cli, ThreadsAndSizeHaveUpperBounds) {
  const int cpus = int(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(parse_render_options({"--threads", std::to_string(cpus)}).engine.threads, cpus);
  for (const int threads : {cpus + 1, 5000, 100000})
    EXPECT_EQ(error_of({"--threads", std::to_string(threads)}),
              cat("flag '--threads': expected at most ", cpus, " (the CPUs of this machine; 0 = as many as are idle), got ",
                  threads));
  EXPECT_EQ(parse_render_options({"--size", "4096"}).engine.width, 4096);
  for (const std::string big : {"1000000x4", "4x1000000", "4100", "8192x8192"})
    EXPECT_EQ(error_of({"--size", big}),
              "flag '--size': expected sides of at most 4096 (multiples of the model's size multiple: 4 for the "
              "default model), got '" + big + "'");
}

TEST(Cli, ParserOnAnyTableKeepsPositionalsAndValuesThatLookLikeFlags) {
  const std::vector<FlagSpec> specs = {{"count", 'c', ValueKind::Int, "how many", "1", ""},
                                       {"name", 0, ValueKind::String, "a name", "", "NAME"},
                                       {"verbose", 'v', ValueKind::None, "talk", "", ""}};
  const Flags f = parse_flags("demo", specs, {"in.txt", "--name", "-dash-", "-v", "-c", "-4", "out.txt"});
  EXPECT_EQ(f.positional(), (std::vector<std::string>{"in.txt", "out.txt"}));
  EXPECT_EQ(f.get_string("name", ""), "-dash-");
  EXPECT_TRUE(f.has("verbose"));
  EXPECT_EQ(f.get_int("count", 1), -4);
  EXPECT_EQ(f.get_int("missing", 17), 17);
  EXPECT_FALSE(f.has("missing"));
  try {
    parse_flags("demo", specs, {"--nope"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown flag '--nope' for 'rtvd demo' (see rtvd demo --help)");
  }
}

// Text as words joined by single spaces.
std::string words_of(const std::string& text) {
  std::istringstream in(text);
  std::string out, word;
  while (in >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

// At widths drawn afresh each run: each flag's entry is its flag line and the lines under it, whose words
// are its help and default; every description starts at one column, continuations too; no line is wider.
TEST(Cli, HelpIsWrappedToTheWidthWithContinuationsUnderTheDescription) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int round = 0; round < 20; ++round) {
    const int width = rng.integer(60, 160);
    SCOPED_TRACE(cat("width ", width));
    const std::string help = flags_help(render_flags(), width);
    std::vector<std::vector<std::string>> entries;  // each: its lines
    std::istringstream lines(help);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_LE(line.size(), size_t(width)) << line;
      if (line.starts_with("  -") || line.starts_with("      --")) entries.emplace_back();  // a flag's own line
      ASSERT_FALSE(entries.empty()) << "a line before the first flag: " << line;
      entries.back().push_back(line);
    }
    ASSERT_EQ(entries.size(), render_flags().size()) << help;
    size_t column = std::string::npos;
    for (size_t i = 0; i < entries.size(); ++i) {
      const FlagSpec& spec = render_flags()[i];
      const std::string& first = entries[i][0];
      const std::string flag = spec.short_name ? cat("  -", spec.short_name, ", --", spec.name) : "      --" + spec.name;
      EXPECT_EQ(first.rfind(flag, 0), 0u) << first;
      // The description: where the flag line's text resumes after two spaces, or the next line's indent.
      std::string description;
      size_t at = first.find("  ", flag.size());
      for (size_t l = 0; l < entries[i].size(); ++l) {
        const std::string& line = entries[i][l];
        const size_t start = l == 0 ? (at == std::string::npos ? line.size() : line.find_first_not_of(' ', at))
                                    : line.find_first_not_of(' ');
        if (start == std::string::npos || start >= line.size()) continue;
        if (column == std::string::npos) column = start;
        EXPECT_EQ(start, column) << line;
        description += " " + line.substr(start);
      }
      std::string expected = spec.help;
      if (!spec.default_text.empty()) expected += " (default " + spec.default_text + ")";
      EXPECT_EQ(words_of(description), words_of(expected)) << spec.name;
    }
  }
}

// Through the binary: the usage of the commands whose dispatch is not the parser's, and argument errors
// that must come before any output.
class Commands : public testing::Test {
 protected:
  test::RunResult rtvd(const Args& args) const {
    return test::run_program(test::rtvd_binary(), args, test::environment(), temp_.dir(), 120);
  }
  test::TempDir temp_;
};

TEST_F(Commands, UsageListsEveryBenchmarkAndBenchHelpIsNotAnError) {
  const test::RunResult top = rtvd({"help"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  for (const char* bench : {"frames:", "unet:", "kernels:"})
    EXPECT_NE(top.out.find(bench), std::string::npos) << top.out;
  for (const Args& args : {Args{"bench", "--help"}, Args{"bench", "-h"}}) {
    const test::RunResult r = rtvd(args);
    EXPECT_EQ(r.exit_code, 0) << args[1] << ": " << r.err;
    EXPECT_EQ(r.err, "") << args[1];
    EXPECT_TRUE(r.out.starts_with("usage: rtvd bench <benchmark> [flags]\n")) << r.out;
    for (const char* bench : {"\n  frames ", "\n  unet ", "\n  kernels "})
      EXPECT_NE(r.out.find(bench), std::string::npos) << r.out;
  }
  const test::RunResult none = rtvd({"bench"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err, "rtvd: error: rtvd bench needs a benchmark: frames, unet, text or kernels (see rtvd bench --help)\n");
  const test::RunResult typo = rtvd({"bench", "unets"});
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_EQ(typo.err,
            "rtvd: error: unknown benchmark 'unets' (expected frames, unet, text or kernels; see rtvd bench --help)\n");
}

// Help through the binary, whose stdout is not a terminal here: 100 columns at most.
TEST_F(Commands, EveryHelpFitsInOneHundredColumns) {
  for (const Args& args : {Args{"help"}, Args{"render", "--help"}, Args{"gui", "--help"}, Args{"info", "--help"},
                           Args{"bench", "--help"}, Args{"bench", "frames", "--help"}, Args{"bench", "unet", "--help"},
                           Args{"bench", "text", "--help"}, Args{"bench", "kernels", "--help"}}) {
    const test::RunResult r = rtvd(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    int count = 0;
    for (std::string line; std::getline(lines, line); ++count) EXPECT_LE(line.size(), 100u) << args[0] << ": " << line;
    EXPECT_GT(count, 5) << r.out;
  }
}

TEST_F(Commands, InfoRefusesBadArgumentsBeforePrintingAnything) {
  const std::string missing = temp_.path("no-such-model");
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"info", "--bogus"}, "unknown flag '--bogus' for 'rtvd info' (see rtvd info --help)"},
      {{"info", "extra"}, "unexpected argument 'extra' for 'rtvd info' (see rtvd info --help)"},
      {{"info", "--model", missing}, "--model " + missing + ": no such folder or file"},
  };
  for (const auto& [args, error] : cases) {
    const test::RunResult r = rtvd(args);
    EXPECT_EQ(r.exit_code, 1) << args[1];
    EXPECT_EQ(r.out, "") << args[1] << ": nothing is printed before the error";
    EXPECT_TRUE(r.err.starts_with("rtvd: error: " + error)) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const test::RunResult ok = rtvd({"info", "--device", "cpu"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("(multiples of 4)"), std::string::npos) << "--size's help says 4 for the default model";
}

}  // namespace
}  // namespace rtvd::cli
