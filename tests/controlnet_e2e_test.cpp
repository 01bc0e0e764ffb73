// rtvd render's ControlNet flags through the binary, on tests/data/tiny_sd with tests/data/tiny_controlnet's
// nets: a net's --control reaches it (the source given as a file renders what --control source renders, Canny
// edges something else); a net for another architecture, a control video shorter than the run and flags out of
// place are one line naming the file or flag, exit 1; a control image of another size is fitted, with a note.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "build_config.h"
#include "pipeline/io/png.h"
#include "support/controlnet_reference.h"
#include "support/process.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

class ControlNetE2E : public testing::Test {
 protected:
  void SetUp() override {
    nets_ = rtvd::test::tiny_controlnet_dir();
    if (nets_.empty()) GTEST_SKIP();
  }
  std::string path(const std::string& name) const { return temp_.path(name); }

  rtvd::test::RunResult run(const Args& flags) const {
    Args args = {"render", "--model", rtvd::test::test_data("tiny_sd"), "--device", "cpu", "--size", "32",
                 "--steps", "2", "-q"};
    args.insert(args.end(), flags.begin(), flags.end());
    const fs::path logs = temp_.dir() / ("logs" + std::to_string(++runs_));
    fs::create_directories(logs);
    return rtvd::test::run_program(rtvd::test::rtvd_binary(), args, rtvd::test::environment(), logs, 120);
  }

  // Refused: exit 1, nothing on stdout, one line on stderr holding each of `parts`.
  void expect_refused(const Args& flags, const std::vector<std::string>& parts) const {
    const rtvd::test::RunResult r = run(flags);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.err.starts_with("rtvd: error: ")) << r.err;
    for (const std::string& p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << p << " in " << r.err;
  }

  // A w x h PNG of random pixels.
  std::string random_png(const std::string& name, int w, int h, rtvd::test::Rng& rng) const {
    rtvd::ImageRgba8 image{w, h, std::vector<uint8_t>(size_t(w) * h * 4)};
    for (uint8_t& v : image.pixels) v = uint8_t(rng.integer(0, 255));
    rtvd::write_png(path(name), image);
    return path(name);
  }

  std::string net(int k) const { return nets_ + "/net" + std::to_string(k); }

  std::string nets_;
  rtvd::test::TempDir temp_{"rtvd_controlnet_e2e"};
  mutable int runs_ = 0;
};

std::vector<uint8_t> pixels(const std::string& png) { return rtvd::read_png(png).pixels; }

int max_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int d = a.size() == b.size() ? 0 : 256;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(int(a[i]) - int(b[i])));
  return d;
}

// Each net gets its own --control: the source as a file is the source (to a byte: the host's and the device's
// [0, 1] conversions round apart), Canny edges of it are not; with a second net after it, the first keeps its own.
TEST_F(ControlNetE2E, EachNetGetsItsOwnControl) {
  rtvd::test::Rng rng;
  SCOPED_TRACE(rtvd::test::seed_trace(rng));
  const std::string source = random_png("source.png", 32, 32, rng), other = random_png("other.png", 32, 32, rng);
  const auto frame = [&](const std::string& name, Args controls) {
    // strength 1: both steps run, so that net 2 starting half way runs at the second
    Args flags = {"--source", "image:" + source, "--strength", "1", "--frames", "1", "-o", path(name + "/")};
    flags.insert(flags.end(), controls.begin(), controls.end());
    const rtvd::test::RunResult r = run(flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return pixels(path(name + "/frame_00000.png"));
  };
  const auto as_source = frame("source", {"--controlnet", net(1) + ":1.5", "--control", "source"});
  const auto as_file = frame("file", {"--controlnet", net(1) + ":1.5", "--control", source});
  const auto canny = frame("canny", {"--controlnet", net(1) + ":1.5", "--control", "canny", "--canny", "40:90"});
  EXPECT_LE(max_difference(as_source, as_file), 1);
  EXPECT_GT(max_difference(as_source, canny), 2);
  // Two nets on one line: net 2's flags do not change net 1's.
  const auto two = frame("two", {"--controlnet", net(1) + ":1.5", "--control", "source", "--controlnet",
                                 net(2) + ":2", "--control", other, "--control-start", "0.5"});
  const auto two_swapped = frame("swapped", {"--controlnet", net(1) + ":1.5", "--control", other, "--controlnet",
                                             net(2) + ":2", "--control", "source", "--control-start", "0.5"});
  EXPECT_GT(max_difference(two, as_source), 0);
  EXPECT_GT(max_difference(two, two_swapped), 2);
}

// An SD 1.x-structured net on an SDXL model: the net's path and the field that disagrees.
TEST_F(ControlNetE2E, NetForAnotherArchitectureIsOneLine) {
  rtvd::test::Rng rng;
  const std::string control = random_png("control.png", 32, 32, rng);
  const rtvd::test::RunResult r = rtvd::test::run_program(
      rtvd::test::rtvd_binary(),
      {"render", "--model", rtvd::test::test_data("tiny_sdxl_pipeline/model"), "--device", "cpu", "-q", "--frames",
       "1", "-o", path("sdxl/"), "--controlnet", net(1), "--control", control},
      rtvd::test::environment(), temp_.dir(), 120);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--controlnet " + net(1) + ": a ControlNet for another architecture"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("cross_attention_dim"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("sdxl/frame_00000.png")));
}

// A control image of another size renders, fitted, with one note naming it and both sizes.
TEST_F(ControlNetE2E, ControlImageOfAnotherSizeIsFittedWithANote) {
  rtvd::test::Rng rng;
  const std::string control = random_png("wide.png", 48, 40, rng);
  Args args = {"render", "--model", rtvd::test::test_data("tiny_sd"), "--device", "cpu", "--size", "32", "--steps",
               "1", "--frames", "1", "-o", path("wide/"), "--controlnet", net(1), "--control", control};
  const rtvd::test::RunResult r =
      rtvd::test::run_program(rtvd::test::rtvd_binary(), args, rtvd::test::environment(), temp_.dir(), 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: --control " + control + " is 48x40: its frames are cropped to the frame's aspect "
                       "ratio and resized to 32x32\n"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(path("wide/frame_00000.png")));
}

// A control video of 2 frames for a run of 3: refused before any frame, naming the file and both counts.
TEST_F(ControlNetE2E, ControlVideoShorterThanTheRunIsRefused) {
  if (!RTVD_HAS_LIBAV || !RTVD_HAS_OPENCV) GTEST_SKIP() << "needs FFmpeg's libraries to write and OpenCV to read a video";
  const rtvd::test::RunResult made = run({"--frames", "2", "-o", path("short.mp4")});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  expect_refused({"--frames", "3", "-o", path("long.mp4"), "--controlnet", net(1), "--control",
                  "video:" + path("short.mp4")},
                 {"--control " + path("short.mp4") + ": the control video has 2 frames, the run 3"});
  EXPECT_FALSE(fs::exists(path("long.mp4")));
  const rtvd::test::RunResult fits = run({"--frames", "2", "-o", path("fits/"), "--controlnet", net(1), "--control",
                                          "video:" + path("short.mp4")});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
}

// Flags out of place: one line naming the flag.
TEST_F(ControlNetE2E, FlagsOutOfPlaceAreOneLine) {
  rtvd::test::Rng rng;
  const std::string control = random_png("c.png", 32, 32, rng);
  expect_refused({"-o", path("x/"), "--control", "canny"}, {"'--control'", "none is given"});
  expect_refused({"-o", path("x/"), "--controlnet", net(1)}, {"--controlnet " + net(1), "--control canny"});
  expect_refused({"-o", path("x/"), "--controlnet", net(1), "--control", control, "--canny", "1:2"},
                 {"'--canny'", net(1)});
  expect_refused({"-o", path("x/"), "--controlnet", net(1), "--control", "canny"}, {"--control canny", "--source"});
  expect_refused({"-o", path("x/"), "--controlnet", net(1), "--control", control, "--control-end", "1.5"},
                 {"'--control-end'"});
  expect_refused({"-o", path("x/"), "--controlnet", net(1), "--control", control, "--control-start", "0.6",
                  "--control-end", "0.4"},
                 {"--control-start 0.6", "--control-end 0.4"});
  expect_refused({"-o", path("x/"), "--controlnet", path("nothing"), "--control", control},
                 {"--controlnet " + path("nothing"), "no such folder or file"});
  expect_refused({"-o", path("x/"), "--controlnet", net(1), "--control", control, "--steps", "2", "--stream-batch",
                  "2"},
                 {"--stream-batch"});
}

}  // namespace
