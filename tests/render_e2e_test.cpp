// End to end: runs the built rtvd binary and checks what it leaves on disk with readers that share no
// code with it (ffprobe for MP4, the PNG header bytes read here), that every bad input is one line
// on stderr, a non-zero exit code and no output file, and what a full disk leaves (a good file at the
// output path untouched, what was written playable where the error says), and what a frame that is not finite
// leaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "build_config.h"
#include "pipeline/io/png.h"
#include "support/ffprobe.h"
#include "support/overflowing_model.h"
#include "support/process.h"
#include "support/test_util.h"
#include "support/write_limits.h"

namespace {

namespace fs = std::filesystem;

using Result = rtvd::test::RunResult;
using rtvd::test::read_file;

class RenderE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(tmp_ / "logs");
  }
  std::string path(const std::string& name) const { return temp_.path(name); }

  Result run(const std::vector<std::string>& args) const {
    return rtvd::test::run_program(rtvd::test::rtvd_binary(), args, rtvd::test::environment(), tmp_ / "logs");
  }

  // A render that must succeed; its output is described on failure.
  void render_ok(std::vector<std::string> args, Result* result = nullptr) const {
    args.insert(args.begin(), {"render", "--device", "cpu", "--size", "32", "-q"});
    const Result r = run(args);
    ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "stderr:\n" << r.err;
    if (result) *result = r;
  }

  // A quick render of many frames into output, which is to fail on the way (a video at 4 frames/s: PNG frames
  // have no rate, and --fps with them is refused).
  Result render_long(const std::string& output) const {
    std::vector<std::string> args = {"render", "--device", "cpu", "--size", "32", "--steps", "1", "--threads", "1",
                                     "--frames", "2000", "-q", "-o", output};
    if (!output.ends_with(".png")) args.insert(args.end(), {"--fps", "4"});
    return run(args);
  }

  rtvd::test::TempDir temp_{"rtvd_e2e"};
  const fs::path& tmp_ = temp_.dir();
};

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Width and height from the IHDR chunk, which the PNG standard puts first: bytes 16..23, big-endian.
std::array<uint32_t, 2> png_size(const fs::path& file) {
  const std::string b = read_file(file);
  if (b.size() < 24 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || b.compare(12, 4, "IHDR") != 0) return {0, 0};
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | uint8_t(b[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

TEST_F(RenderE2E, Mp4IsH264OfTheRequestedSizeAndLength) {
  if (!RTVD_HAS_LIBAV) GTEST_SKIP() << "built without FFmpeg's libraries: no MP4 output";
  render_ok({"--frames", "3", "--fps", "10", "-o", path("x.mp4")});
  EXPECT_EQ(files_in(tmp_), (std::vector<fs::path>{path("logs"), path("x.mp4")})) << "no temporary file left";
  if (std::system("ffprobe -version > /dev/null 2>&1") != 0) GTEST_SKIP() << "ffprobe is not installed";
  const std::string cmd = "ffprobe -v error -count_frames -select_streams v:0 -show_entries "
                          "stream=codec_name,width,height,nb_read_frames -of csv=p=0 '" + path("x.mp4") + "'";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 256> line{};
  const bool got = std::fgets(line.data(), line.size(), p) != nullptr;
  ::pclose(p);
  ASSERT_TRUE(got) << cmd;
  EXPECT_EQ(std::string(line.data()), "h264,32,32,3\n");
}

TEST_F(RenderE2E, PngSequenceHasOneFileOfTheRightSizePerFrame) {
  render_ok({"--frames", "3", "--steps", "1", "-o", path("frames/")});
  const std::vector<fs::path> files = files_in(path("frames"));
  ASSERT_EQ(files.size(), 3u);
  for (const fs::path& f : files) {
    EXPECT_EQ(f.extension(), ".png") << f;
    EXPECT_EQ(png_size(f), (std::array<uint32_t, 2>{32, 32})) << f;
  }
}

// The start-up notes (app/common/startup_notes.h, which rtvd gui prints too) come before the line that says
// what is rendered, and -q leaves them out.
TEST_F(RenderE2E, StartupNotesComeBeforeTheRenderingLineAndQuietDropsThem) {
  const Result r = run({"render", "--device", "cpu", "--size", "32", "--frames", "1", "--steps", "1", "-o", path("n/")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string note = "note: the model was trained at 64x64; at 32x32 it gives poor images (leave out --size for 64x64)\n";
  EXPECT_EQ(r.err.rfind(note + "rendering 1 frames of 32x32", 0), 0u) << r.err;
  Result quiet;
  render_ok({"--frames", "1", "--steps", "1", "-o", path("q/")}, &quiet);
  EXPECT_EQ(quiet.err, "");
}

TEST_F(RenderE2E, SameSeedSameBytesOtherSeedOtherFrames) {
  render_ok({"--frames", "2", "--steps", "1", "--seed", "7", "-o", path("a/")});
  render_ok({"--frames", "2", "--steps", "1", "--seed", "7", "-o", path("b/")});
  render_ok({"--frames", "2", "--steps", "1", "--seed", "8", "-o", path("c/")});
  const auto a = files_in(path("a")), b = files_in(path("b")), c = files_in(path("c"));
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  ASSERT_EQ(c.size(), 2u);
  bool any_differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(read_file(a[i]), read_file(b[i])) << a[i] << " vs " << b[i];
    any_differs |= read_file(a[i]) != read_file(c[i]);
  }
  EXPECT_TRUE(any_differs) << "seeds 7 and 8 rendered the same frames";
}

// A stream batch writes every frame asked for (the frames still in flight when the source ends come out after
// more steps), each the frame one at a time gives, and says its latency.
TEST_F(RenderE2E, AStreamBatchWritesEveryFrameAsOneAtATime) {
  Result r;
  render_ok({"--frames", "5", "--steps", "1", "--seed", "9", "--stream-batch", "4", "-o", path("stream/")}, &r);
  EXPECT_NE(r.out.find("1 steps, stream batch 4: 3 frames of latency)"), std::string::npos) << r.out;
  render_ok({"--frames", "5", "--steps", "1", "--seed", "9", "-o", path("one/")});
  const auto stream = files_in(path("stream")), one = files_in(path("one"));
  ASSERT_EQ(stream.size(), 5u);
  ASSERT_EQ(one.size(), 5u);
  for (size_t i = 0; i < one.size(); ++i) {
    const rtvd::ImageRgba8 a = rtvd::read_png(stream[i].string()), b = rtvd::read_png(one[i].string());
    ASSERT_EQ(a.pixels.size(), b.pixels.size());
    int most = 0;
    for (size_t k = 0; k < a.pixels.size(); ++k) most = std::max(most, std::abs(int(a.pixels[k]) - int(b.pixels[k])));
    EXPECT_LE(most, 1) << stream[i] << " vs " << one[i];
  }
}

// --skip-similar on a still image source: the first frame renders, each later one is the frame before
// written again (the same PNG bytes), and the summary counts them; without the flag every frame renders
// (the noise walk moves them).
TEST_F(RenderE2E, SkipSimilarOnAStillImageWritesTheFrameBeforeAndCountsIt) {
  rtvd::test::Rng rng;
  SCOPED_TRACE(rtvd::test::seed_trace(rng));
  rtvd::ImageRgba8 image{32, 32, std::vector<uint8_t>(32 * 32 * 4)};
  for (uint8_t& v : image.pixels) v = uint8_t(rng.integer(0, 255));
  rtvd::write_png(path("still.png"), image);
  const std::vector<std::string> still = {"--frames", "4", "--steps", "1", "--seed", std::to_string(rng.integer(0, 999)),
                                          "--source", "image:" + path("still.png")};
  std::vector<std::string> args = still;
  args.insert(args.end(), {"--skip-similar", "0.999", "-o", path("skip/")});
  Result r;
  render_ok(args, &r);
  EXPECT_NE(r.out.find("skipped 3 of 4 frames (--skip-similar 0.999: "), std::string::npos) << r.out;
  const auto skipped = files_in(path("skip"));
  ASSERT_EQ(skipped.size(), 4u);
  for (size_t i = 1; i < skipped.size(); ++i) EXPECT_EQ(read_file(skipped[i]), read_file(skipped[0])) << skipped[i];

  args = still;
  args.insert(args.end(), {"-o", path("all/")});
  render_ok(args, &r);
  EXPECT_EQ(r.out.find("skipped"), std::string::npos) << r.out;
  const auto all = files_in(path("all"));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(read_file(all[0]), read_file(skipped[0])) << "the first frame is the same";
  EXPECT_NE(read_file(all[1]), read_file(all[0])) << "without the filter the next frame renders";
}

// An SD model from a diffusers folder with a prompt, TAESD instead of its VAE (8 pixels per latent: 256x256
// frames from the tiny U-Net's 32x32 latents) and a LoRA: the frames come out at that size, the LoRA changes
// them, and the same flags give the same bytes.
TEST_F(RenderE2E, SdModelWithTaesdAndLora) {
  const std::vector<std::string> sd = {"render", "--device", "cpu", "-q", "--model", rtvd::test::test_data("tiny_sd"),
                                       "--vae", rtvd::test::test_data("tiny_taesd"), "--prompt", "a watercolor fox",
                                       "--steps", "2", "--guidance", "0", "--frames", "2"};
  const auto render = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = sd;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"-o", path(out)});
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return files_in(path(out));
  };
  const std::string lora = rtvd::test::test_data("lora/lora_peft.safetensors") + ":0.7";
  const auto plain = render("plain/", {}), with_lora = render("lora/", {"--lora", lora}),
             again = render("again/", {"--lora", lora});
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(with_lora.size(), 2u);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(png_size(plain[0]), (std::array<uint32_t, 2>{256, 256}));
  EXPECT_NE(read_file(plain[1]), read_file(with_lora[1])) << "the LoRA changes the frames";
  EXPECT_EQ(read_file(with_lora[1]), read_file(again[1]));

  // The time to the first frame, part by part: the parts, in the order they run, add up to the total.
  std::vector<std::string> timed_args = sd;
  timed_args.insert(timed_args.end(), {"-o", path("timed/")});
  const Result timed = run(timed_args);
  const std::regex line(R"(first frame ([0-9.]+) s after the command started \((.*) s\)\n)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(timed.out, m, line)) << timed.out;
  std::vector<std::string> parts;
  double sum = 0;
  const std::regex part(R"(([a-z ]+) ([0-9.]+))");
  const std::string listed = m[2];
  for (auto it = std::sregex_iterator(listed.begin(), listed.end(), part); it != std::sregex_iterator(); ++it) {
    parts.push_back((*it)[1].str().substr((*it)[1].str().find_first_not_of(' ')));
    sum += std::stod((*it)[2]);
  }
  EXPECT_EQ(parts, (std::vector<std::string>{"source", "model files", "backend", "text encoder", "weights", "prompts",
                                             "plan", "first frame"}))
      << m[2];
  EXPECT_NEAR(sum, std::stod(m[1]), 0.005 * (parts.size() + 1)) << m[0];

  // The latent models' flags on the default model, and a pickle as a model, are one line each.
  const Result vae = run({"render", "--device", "cpu", "--vae", "tiny", "-o", path("x/")});
  EXPECT_EQ(vae.exit_code, 1);
  EXPECT_EQ(vae.err, "rtvd: error: --vae: the embedded default model is a pixel-space model (no autoencoder, scheduler "
                     "or text encoder)\n");
  const Result config = run({"render", "--device", "cpu", "--model", rtvd::test::test_data("tiny_sd"), "--config",
                             rtvd::test::test_data("tiny_sd"), "-o", path("z/")});
  EXPECT_EQ(config.exit_code, 1);
  EXPECT_NE(config.err.find("--config " + rtvd::test::test_data("tiny_sd") + ": only a single-file checkpoint"),
            std::string::npos) << config.err;
  std::ofstream(path("model.ckpt")) << "PK";
  const Result ckpt = run({"render", "--device", "cpu", "--model", path("model.ckpt"), "-o", path("y/")});
  EXPECT_EQ(ckpt.exit_code, 1);
  EXPECT_NE(ckpt.err.find("safetensors"), std::string::npos) << ckpt.err;
  EXPECT_EQ(std::count(ckpt.err.begin(), ckpt.err.end(), '\n'), 1) << ckpt.err;
  EXPECT_FALSE(fs::exists(path("x"))) << "nothing is written";
}

TEST_F(RenderE2E, BadInputIsOneErrorLineAndNoOutput) {
  fs::create_directory(path("corrupt"));
  fs::copy_file(rtvd::test::test_data("tiny_batch/config.json"), path("corrupt/config.json"));
  std::ofstream(path("corrupt/weights.safetensors")) << "this is not a safetensors file, just text";

  struct Case {
    std::vector<std::string> flags;
    std::string named;  // what the error line must mention
    std::string output = RTVD_HAS_LIBAV ? "out/bad.mp4" : "out/bad/";
  };
  const std::vector<Case> cases = {
      {{"--frobnicate"}, "'--frobnicate'"},
      {{"--frames", "-1"}, "--frames"},
      {{"--fps", "0"}, "--fps"},
      {{"--fps", "0.001"}, "flag '--fps': expected a number in [1, 240], got 0.001"},
      {{"--fps", "1e9"}, "flag '--fps': expected a number in [1, 240], got 1e9"},
      {{}, "use .mkv or .mp4", "out/bad.avi"},
      {{"--strength", "1.5"}, "--strength"},
      {{"--steps", "0"}, "--steps"},
      {{"--model", path("no_such_model")}, path("no_such_model")},
      {{"--model", path("corrupt")}, path("corrupt")},
      {{"--source", "video:/nonexistent.mp4"}, RTVD_HAS_OPENCV ? "/nonexistent.mp4" : "video sources need it"},
      {{}, "/proc/rtvd_e2e.mp4", "/proc/rtvd_e2e.mp4"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"render", "--device", "cpu", "--frames", "2", "--size", "32"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const std::string output = c.output.starts_with("/") ? c.output : path(c.output);
    args.insert(args.end(), {"-o", output});
    std::string command;
    for (const auto& a : args) command += " " + a;
    SCOPED_TRACE("rtvd" + command);

    const Result r = run(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err.rfind("rtvd: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
    EXPECT_NE(r.err.find(c.named), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(output));
    EXPECT_FALSE(fs::exists(path("out"))) << "the output directory it made is removed again";
  }
}

// The number N in "... the first N play from ..." of a failed recording's message, or -1.
int frames_kept(const std::string& message) {
  const size_t at = message.find("the first ");
  return at == std::string::npos ? -1 : std::atoi(message.c_str() + at + 10);
}

// A recording that fails part-way: one error line naming the output, the cause, the free space and where
// the frames written play from (ffprobe reads exactly that many there); the good file at the output path is
// byte for byte what it was.
void expect_stopped(const Result& r, const std::string& output, const std::string& cause) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("rtvd: error: " + output + ": " + cause, 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
  EXPECT_NE(r.err.find(" free in "), std::string::npos) << r.err;
  const std::string partial = fs::path(output).replace_extension(".partial.mp4").string();
  EXPECT_NE(r.err.find(" play from " + partial), std::string::npos) << r.err;
  const int kept = frames_kept(r.err);
  EXPECT_GT(kept, 0) << r.err;
  EXPECT_EQ(rtvd::test::ffprobe_frame_count(partial), kept) << r.err;
  EXPECT_EQ(read_file(output), "a good recording");
}

TEST_F(RenderE2E, AFullDiskStopsWithOneLineAndKeepsBothTheOldFileAndWhatWasWritten) {
  if (!RTVD_HAS_LIBAV) GTEST_SKIP() << "built without FFmpeg's libraries: no MP4 output";
  if (!rtvd::test::ffprobe_available()) GTEST_SKIP() << "ffprobe is not installed";
  const rtvd::test::SmallFilesystem disk(path("disk"), 8 << 10);  // a page for the good file, one to fill
  if (!disk.mounted()) GTEST_SKIP() << disk.why_not();
  const std::string output = path("disk/x.mp4");
  std::ofstream(output) << "a good recording";
  expect_stopped(render_long(output), output, "disk full (no space left on device)");

  // Already full: the disk is named as the cause, not the encoder, and nothing is left behind.
  fs::remove(path("disk/x.partial.mp4"));
  disk.fill();
  const Result r = render_long(output);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("rtvd: error: " + output + ": disk full (no space left on device); 0 B free in ", 0), 0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
  EXPECT_FALSE(fs::exists(path("disk/x.partial.mp4")));
  EXPECT_EQ(read_file(output), "a good recording");
}

// The same through a file-size limit (`ulimit -f`), which needs no privilege: EFBIG instead of ENOSPC. rtvd
// inherits the limit, and SIGXFSZ at its default action, which ended it mid-write (exit 153, no message, a
// torn file) until it ignored the signal.
TEST_F(RenderE2E, AFileSizeLimitStopsTheRecordingTheSameWay) {
  if (!RTVD_HAS_LIBAV) GTEST_SKIP() << "built without FFmpeg's libraries: no MP4 output";
  if (!rtvd::test::ffprobe_available()) GTEST_SKIP() << "ffprobe is not installed";
  const std::string output = path("x.mp4");
  std::ofstream(output) << "a good recording";
  Result r;
  {
    const rtvd::test::FileSizeLimit limit(4 << 10);
    r = render_long(output);
  }
  expect_stopped(r, output, "the file reached the largest size allowed: the file size limit (ulimit -f) is 4.0 KiB; ");
}

// A PNG frame larger than the limit: one line naming the pattern, the frame and the limit, and no torn frame
// (nor the directory rtvd made for it) left behind.
TEST_F(RenderE2E, AFileSizeLimitStopsAPngSequenceWithOneLine) {
  const std::string output = path("frames/%05d.png");
  Result r;
  {
    const rtvd::test::FileSizeLimit limit(1 << 10);  // a 32x32 frame of noise is about 2 KiB
    r = render_long(output);
  }
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("rtvd: error: " + output + ": frame 0 (00000.png): write failed: the file reached the "
                        "largest size allowed: the file size limit (ulimit -f) is 1.0 KiB; ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("; recording stopped, no frame was written\n"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
  EXPECT_FALSE(fs::exists(path("frames")));
}

// --profile's trace is written after the last frame; a place it cannot go is refused before the first, with
// the cause. It failed only after the whole render ("cannot write"), which had written the video.
TEST_F(RenderE2E, AProfileThatCannotBeWrittenIsRefusedBeforeTheRender) {
  fs::create_directory(path("dir.json"));
  const std::string output = path(RTVD_HAS_LIBAV ? "x.mp4" : "x/");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {path("no_dir/trace.json"), "cannot use directory '" + path("no_dir") + "': no such file or directory"},
      {path("dir.json"), "is a directory, expected a file"},
      {"/proc/rtvd_trace.json", "cannot write in directory '/proc': "},
  };
  for (const auto& [trace, cause] : cases) {
    SCOPED_TRACE(trace);
    const Result r = run({"render", "--device", "cpu", "--size", "32", "--frames", "2", "--steps", "1", "-q",
                          "--profile", trace, "-o", output});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("rtvd: error: --profile " + trace + ": " + cause, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(output)) << "nothing was rendered";
  }
}

// NAME.partial.EXT is where the video NAME.EXT is until it is complete: as an output, it was accepted, and then
// every later -o NAME.EXT was refused ("left from a recording that did not finish").
TEST_F(RenderE2E, APartialNameIsRefusedAsAnOutput) {
  if (!RTVD_HAS_LIBAV) GTEST_SKIP() << "built without FFmpeg's libraries: no video output";
  for (const std::string name : {"x.partial.mp4", "x.partial.mkv", "x.PARTIAL.MP4"}) {
    SCOPED_TRACE(name);
    const Result r = run({"render", "--device", "cpu", "--size", "32", "--frames", "2", "--steps", "1", "-q",
                          "-o", path(name)});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const std::string ext = fs::path(name).extension().string();
    EXPECT_EQ(r.err, "rtvd: error: " + path(name) + ": NAME.partial" + ext + " is where rtvd keeps the video NAME" +
                         ext + " until it is complete: choose a name without .partial\n");
    EXPECT_EQ(files_in(tmp_), std::vector<fs::path>{tmp_ / "logs"}) << "nothing is written";
  }
  render_ok({"--frames", "2", "--steps", "1", "-o", path("x.mp4")});
}

// A frame that is not finite (NaN from the model: support/overflowing_model.h's second frame) is never
// recorded: the render stops with one line naming the frame and the likely causes and leaves the frames
// before it playable; a first frame that is not finite leaves nothing. Before, every such frame was written
// black and the render exited 0.
TEST_F(RenderE2E, AFrameThatIsNotFiniteStopsTheRenderAndIsNotRecorded) {
  if (!RTVD_HAS_LIBAV || !RTVD_HAS_OPENCV) GTEST_SKIP() << "needs FFmpeg's libraries and OpenCV for video";
  if (!rtvd::test::ffprobe_available()) GTEST_SKIP() << "ffprobe is not installed";
  const rtvd::test::OverflowingModel m = rtvd::test::write_overflowing_model(tmp_);
  const auto render = [&](const std::string& source, const std::string& output) {
    return run({"render", "--device", "cpu", "--model", m.model, "--source", source, "--strength", "0.001", "--steps",
                "1", "--size", "32", "--frames", "4", "-q", "-o", output});
  };
  const std::string cause = " is not finite (NaN or Inf in the model's output): lower --guidance or a --lora scale, "
                            "or the checkpoint holds values too large for fp32";
  const Result r = render("video:" + m.video, path("out.mp4"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "rtvd: error: frame 1" + cause + "; the 1 frames rendered before it are in " + path("out.mp4") + "\n");
  EXPECT_EQ(rtvd::test::ffprobe_frame_count(path("out.mp4")), 1);
  EXPECT_FALSE(fs::exists(path("out.partial.mp4")));

  // The first frame: nothing recorded, nothing left.
  const rtvd::ImageRgba8 red{32, 32, std::vector<uint8_t>(32 * 32 * 4, 0)};
  rtvd::ImageRgba8 image = red;
  for (size_t px = 0; px < 32 * 32; ++px) image.pixels[px * 4] = image.pixels[px * 4 + 3] = 255;
  rtvd::write_png(path("red.png"), image);
  const Result first = render("image:" + path("red.png"), path("first.mp4"));
  EXPECT_EQ(first.exit_code, 1);
  EXPECT_EQ(first.err, "rtvd: error: frame 0" + cause + "\n");
  EXPECT_TRUE(files_in(tmp_) == (std::vector<fs::path>{path("grey_red_grey.mp4"), path("logs"), path("out.mp4"),
                                                       path("overflowing_model"), path("red.png")}))
      << "nothing but the inputs and the first output";
}

TEST_F(RenderE2E, APngSequenceOverAnOlderOneLeavesOnlyTheNewFrames) {
  render_ok({"--frames", "5", "--steps", "1", "--threads", "1", "-o", path("frames/")});
  Result r;
  render_ok({"--frames", "2", "--steps", "1", "--threads", "1", "-o", path("frames/")}, &r);
  EXPECT_EQ(files_in(path("frames")),
            (std::vector<fs::path>{path("frames/frame_00000.png"), path("frames/frame_00001.png")}));
  EXPECT_EQ(r.err, "note: removed 3 frames of an older sequence (frame_00002.png to frame_00004.png) from " +
                       path("frames") + "\n");
}

// A video source: its frame rate is the output's unless --fps says otherwise; one shorter than --frames is
// said to be; and it is never the output.
TEST_F(RenderE2E, AVideoSourceGivesItsRateItsLengthAndIsNeverOverwritten) {
  if (!RTVD_HAS_LIBAV || !RTVD_HAS_OPENCV) GTEST_SKIP() << "needs FFmpeg's libraries and OpenCV for video";
  if (!rtvd::test::ffprobe_available()) GTEST_SKIP() << "ffprobe is not installed";
  render_ok({"--frames", "6", "--steps", "1", "--threads", "1", "--fps", "12", "-o", path("clip.mp4")});
  const std::string clip = read_file(path("clip.mp4"));

  Result r;
  render_ok({"--frames", "9", "--steps", "1", "--threads", "1", "--source", "video:" + path("clip.mp4"), "-o",
             path("out.mp4")},
            &r);
  EXPECT_EQ(rtvd::test::ffprobe_stream_entry(path("out.mp4"), "r_frame_rate"), "12/1");
  EXPECT_EQ(rtvd::test::ffprobe_frame_count(path("out.mp4")), 6);
  EXPECT_NE(r.err.find("ended after 6 frames, before the 9 asked for"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  render_ok({"--frames", "2", "--steps", "1", "--threads", "1", "--fps", "5", "--source",
             "video:" + path("clip.mp4"), "-o", path("out5.mp4")});
  EXPECT_EQ(rtvd::test::ffprobe_stream_entry(path("out5.mp4"), "r_frame_rate"), "5/1");

  const Result same = run({"render", "--device", "cpu", "--size", "32", "--frames", "2", "--threads", "1",
                           "--source", "video:" + path("clip.mp4"), "-o", path("./clip.mp4")});
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_EQ(same.err.rfind("rtvd: error: " + path("./clip.mp4") + ": is the source's file", 0), 0u) << same.err;
  EXPECT_EQ(std::count(same.err.begin(), same.err.end(), '\n'), 1) << same.err;
  EXPECT_EQ(read_file(path("clip.mp4")), clip);
}

}  // namespace
