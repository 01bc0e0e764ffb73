// Paths that are not what a flag expects, through the rtvd binary: a FIFO, a directory or /dev/zero where a
// config.json, a tokenizer file, weights or a source image or video should be; a symlink loop anywhere a path
// is examined; a prompt that is not UTF-8. Each is one line that names the path (or the flag) and says what it
// is, exit 1, nothing on stdout, and at once: a FIFO is never waited on, a device never read to its end.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "build_config.h"
#include "support/process.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

class InputPaths : public testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_.path(name); }

  // A FIFO at `at`, with no writer: a reader that opens it waits for one.
  void make_fifo(const std::string& at) const { ASSERT_EQ(::mkfifo(at.c_str(), 0644), 0) << at; }

  // A copy of tests/data/tiny_sd (an SD pipeline with a text encoder) made of symlinks to its files, but for
  // `replaced` (relative to the folder), which is left for the test to make.
  std::string tiny_sd_with(const std::string& name, const std::string& replaced) const {
    const fs::path from = rtvd::test::test_data("tiny_sd"), to = path(name);
    for (const auto& entry : fs::recursive_directory_iterator(from)) {
      const fs::path relative = fs::relative(entry.path(), from);
      if (relative == replaced) continue;
      if (entry.is_directory()) fs::create_directories(to / relative);
      else fs::create_symlink(entry.path(), to / relative);
    }
    return to.string();
  }

  // rtvd refuses: exit 1, one line on stderr that is exactly "rtvd: error: <error>", nothing on stdout, fast.
  void expect_refused(const Args& args, const std::string& error) const {
    std::string command;
    for (const std::string& a : args) command += " " + a;
    SCOPED_TRACE("rtvd" + command);
    const fs::path logs = temp_.dir() / ("logs" + std::to_string(++runs_));
    fs::create_directories(logs);
    const auto start = std::chrono::steady_clock::now();
    const rtvd::test::RunResult r = rtvd::test::run_program(rtvd::test::rtvd_binary(), args,
                                                            rtvd::test::environment(), logs, 20);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 15.0);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "rtvd: error: " + error + "\n");
  }

  Args render(const Args& flags) const {
    Args args = {"render", "--device", "cpu", "--frames", "1", "--steps", "1", "-q", "-o", path("out.mp4")};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  rtvd::test::TempDir temp_{"rtvd_input_paths"};
  mutable int runs_ = 0;
};

// --model DIR reads DIR/config.json: a FIFO there blocked rtvd for good, a directory was "cannot read: Is a
// directory", and /dev/zero was read to the 4 MiB bound and called a config that large.
TEST_F(InputPaths, AConfigThatIsNotARegularFileIsSaidToBeWhatItIs) {
  for (const std::string dir : {"fifo", "dir", "zero", "loop"}) fs::create_directory(path(dir));
  make_fifo(path("fifo/config.json"));
  fs::create_directory(path("dir/config.json"));
  fs::create_symlink("/dev/zero", path("zero/config.json"));
  fs::create_symlink("config.json", path("loop/config.json"));
  expect_refused(render({"--model", path("fifo")}), path("fifo/config.json") + ": is not a regular file (a FIFO)");
  expect_refused(render({"--model", path("dir")}), path("dir/config.json") + ": is a directory");
  expect_refused(render({"--model", path("zero")}),
                 path("zero/config.json") + ": is not a regular file (a character device)");
  expect_refused(render({"--model", path("loop")}),
                 path("loop/config.json") + ": cannot open: Too many levels of symbolic links");
  // --config DIR names a folder of configs the same way (bench unet reads DIR/config.json).
  expect_refused({"bench", "unet", "--device", "cpu", "--config", path("fifo")},
                 path("fifo/config.json") + ": is not a regular file (a FIFO)");

  // The weights beside a config, and a file given as --model, likewise.
  fs::create_directory(path("weights"));
  fs::copy_file(rtvd::test::assets_dir() + "/default/config.json", path("weights/config.json"));
  make_fifo(path("weights/weights.safetensors"));
  expect_refused(render({"--model", path("weights")}), path("weights/weights.safetensors") + ": not a regular file");
  expect_refused(render({"--model", path("weights/weights.safetensors")}),
                 path("weights/weights.safetensors") + ": not a regular file");
}

// A diffusers folder's component files: unet/config.json as a FIFO was "missing (the U-Net's config)", and a
// FIFO as tokenizer/vocab.json blocked.
TEST_F(InputPaths, ADiffusersComponentFileThatIsAFifoIsSaidToBeOne) {
  const std::string unet = tiny_sd_with("unet_fifo", "unet/config.json");
  make_fifo(unet + "/unet/config.json");
  expect_refused(render({"--model", unet}), unet + "/unet/config.json: is not a regular file (a FIFO)");

  const std::string tokenizer = tiny_sd_with("vocab_fifo", "tokenizer/vocab.json");
  make_fifo(tokenizer + "/tokenizer/vocab.json");
  expect_refused(render({"--model", tokenizer, "--size", "64"}),
                 tokenizer + "/tokenizer/vocab.json: is not a regular file (a FIFO)");
}

// --source image:PATH and video:PATH were "no such image file" for all of these.
TEST_F(InputPaths, ASourceThatIsNotARegularFileIsSaidToBeWhatItIs) {
  make_fifo(path("fifo"));
  fs::create_directory(path("dir"));
  fs::create_symlink("loop", path("loop"));
  std::vector<std::string> kinds = {"image"};
  if (RTVD_HAS_OPENCV) kinds.push_back("video");  // without OpenCV, video sources are refused by kind
  for (const std::string& kind : kinds) {
    expect_refused(render({"--source", kind + ":" + path("fifo")}), path("fifo") + ": is not a regular file (a FIFO)");
    expect_refused(render({"--source", kind + ":" + path("dir")}), path("dir") + ": is a directory");
    expect_refused(render({"--source", kind + ":/dev/zero"}), "/dev/zero: is not a regular file (a character device)");
    expect_refused(render({"--source", kind + ":" + path("loop")}), path("loop") + ": too many levels of symbolic links");
    expect_refused(render({"--source", kind + ":" + path("none")}), path("none") + ": no such " + kind + " file");
  }
}

// A symlink loop as --model printed "filesystem error: status: Too many levels of symbolic links [loop]", as
// the directory of -o "cannot create directory 'loop': File exists".
TEST_F(InputPaths, ASymlinkLoopIsOneLineNamingThePathAndTheCause) {
  fs::create_symlink("loop", path("loop"));
  expect_refused(render({"--model", path("loop")}), path("loop") + ": too many levels of symbolic links");
  expect_refused(render({"--vae", path("loop"), "--model", rtvd::test::test_data("tiny_sd")}),
                 path("loop") + ": too many levels of symbolic links");
  expect_refused({"render", "--device", "cpu", "--frames", "1", "-q", "-o", path("loop/x.mp4")},
                 path("loop/x.mp4") + ": cannot use directory '" + path("loop") + "': too many levels of symbolic links");
  expect_refused(render({"--profile", path("loop")}), "--profile " + path("loop") + ": too many levels of symbolic links");
  expect_refused({"bench", "unet", "--device", "cpu", "--config", path("loop")},
                 path("loop") + ": too many levels of symbolic links");
  EXPECT_FALSE(fs::exists(path("out.mp4")));
}

// A prompt that is not UTF-8 was "text to tokenize: not valid UTF-8 ...": the flag is named.
TEST_F(InputPaths, APromptThatIsNotUtf8NamesItsFlag) {
  const std::string model = rtvd::test::test_data("tiny_sd");
  for (const std::string flag : {"--prompt", "--negative-prompt", "--prompt-to"})
    expect_refused(render({"--model", model, "--size", "64", flag, "a fox \xff"}),
                   flag + ": not valid UTF-8 at byte 6 (0xFF)");
}

}  // namespace
