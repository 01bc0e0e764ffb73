// Flags that do not apply are refused, through the binary: one line on stderr naming the flag and why, exit
// code 1, before anything is written. What decides: the model (the default model is pixel-space and
// class-conditional, an SD model takes no class), the source (nothing to re-noise from the noise walk), the
// output (PNG frames have no frame rate), the guidance (a negative prompt needs the unconditional half) and the
// backend that runs (CUDA kernels on the CPU, CPU threads on the GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/backends/gpu.h"
#include "support/process.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::vector<std::string> args;  // after the command and its common flags
  std::string error;              // how the error line starts, after "rtvd: error: "
};

class RefusedFlags : public ::testing::Test {
 protected:
  // The error of `command common... args...`, which must be one line and leave the output unwritten.
  void expect_refused(const std::vector<std::string>& command, const Case& c) const {
    std::vector<std::string> args = command;
    args.insert(args.end(), c.args.begin(), c.args.end());
    std::string line;
    for (const std::string& a : args) line += " " + a;
    SCOPED_TRACE("rtvd" + line);
    const test::RunResult r = test::run_program(test::rtvd_binary(), args, test::environment(), temp_.dir(), 120);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.rfind("rtvd: error: " + c.error, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
    EXPECT_FALSE(fs::exists(output_)) << "nothing is written";
  }

  test::TempDir temp_{"rtvd_refused"};
  const std::string output_ = temp_.path("out/frames/");
  const std::string sd_ = test::test_data("tiny_sd");
};

TEST_F(RefusedFlags, RenderRefusesWhatTheModelSourceOutputOrGuidanceDoesNotUse) {
  const std::vector<Case> cases = {
      // The embedded default model: pixel-space, class-conditional, its own sampler.
      {{"--sampler", "euler"}, "--sampler euler: embedded default model is a pixel-space model with a sampler of its own"},
      {{"--vae", "tiny"}, "--vae: the embedded default model is a pixel-space model"},
      {{"--lora", "x.safetensors"}, "--lora: the embedded default model is a pixel-space model"},
      {{"--prediction-type", "epsilon"}, "--prediction-type: the embedded default model is a pixel-space model"},
      {{"--timestep-spacing", "trailing"}, "--timestep-spacing: the embedded default model is a pixel-space model"},
      {{"--config", sd_}, "--config: the embedded default model is a pixel-space model"},
      {{"--prompt", "a fox"}, "--prompt: this model has no text encoder"},
      {{"--negative-prompt", "a fox"}, "--negative-prompt: this model has no text encoder"},
      {{"--prompt-to", "a fox"}, "--prompt-to: this model has no text encoder"},
      {{"--travel-frames", "4"}, "flag '--travel-frames': only with --prompt-to"},
      {{"--clip-skip", "1"}, "--clip-skip 1: this model has no text encoder"},
      // An SD model: no classes; a negative prompt where guidance runs no unconditional half; a diffusers
      // folder's own configs.
      {{"--model", sd_, "--class", "smileys"}, "--class smileys: this model has no classes"},
      {{"--model", sd_, "--guidance", "1", "--negative-prompt", "blurry"},
       "--negative-prompt: unused at --guidance 1 (guidance's unconditional half"},
      {{"--model", sd_, "--config", sd_}, "--config " + sd_ + ": only a single-file checkpoint takes other configs"},
      // The noise walk has no frame to re-noise; PNG frames have no frame rate.
      {{"--strength", "0.5"}, "flag '--strength': only with an image, video or webcam --source"},
      {{"--skip-similar", "0.999"}, "flag '--skip-similar': only with an image, video or webcam --source"},
      {{"--fps", "12"}, "flag '--fps': PNG frames have no frame rate"},
      // CUDA kernels where the CPU runs the model.
      {{"--kernels", "cudnn"}, "--kernels cudnn: a choice of CUDA kernels, but the model runs on the CPU (--device cpu)"},
  };
  for (const Case& c : cases)
    expect_refused({"render", "--device", "cpu", "--size", "32", "--frames", "1", "-o", output_}, c);
}

TEST_F(RefusedFlags, TheOtherCommandsRefuseTheSameWay) {
  expect_refused({"info", "--device", "cpu"}, {{"--sampler", "lcm"}, "--sampler lcm: embedded default model is"});
  expect_refused({"bench", "frames", "--device", "cpu", "--frames", "3"},
                 {{"--strength", "0.3"}, "flag '--strength': only with --img2img"});
  expect_refused({"bench", "frames", "--device", "cpu", "--frames", "3"},
                 {{"--skip-similar", "0.999"}, "flag '--skip-similar': only with --img2img"});
  expect_refused({"bench", "frames", "--device", "cpu", "--frames", "3"},
                 {{"--moving"}, "flag '--moving': only with --img2img"});
  expect_refused({"bench", "frames", "--device", "cpu", "--frames", "3"},
                 {{"--sampler", "ddim"}, "--sampler ddim: embedded default model is"});
  expect_refused({"bench", "text", "--model", sd_, "--device", "cpu"},
                 {{"--kernels", "custom"}, "--kernels custom: a choice of CUDA kernels, but the model runs on the CPU"});
}

// Which backend runs depends on the machine: CUDA kernels are refused where --device auto finds no GPU, CPU
// threads where it finds one.
TEST_F(RefusedFlags, TheBackendThatRunsRefusesTheOthersFlags) {
  std::string why_not;
  const std::vector<std::string> render = {"render", "--size", "32", "--frames", "1", "-o", output_};
  if (cuda_devices(&why_not).empty()) {
    expect_refused(render, {{"--kernels", "custom"}, "--kernels custom: a choice of CUDA kernels, but the model runs on "
                                                     "the CPU (" + why_not + ")"});
  } else {
    expect_refused(render, {{"--threads", "1"}, "--threads 1: CPU threads, but the model runs on the GPU"});
    expect_refused(render, {{"--device", "cuda", "--threads", "1"}, "--threads 1: CPU threads, but the model runs on the GPU"});
  }
}

}  // namespace
}  // namespace rtvd
