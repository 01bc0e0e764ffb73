// Signals sent to a running `rtvd render` mid-recording, and what they leave on disk as ffprobe reads it:
// SIGINT, SIGTERM and SIGHUP finalise the recording and exit with 128 + the signal's number; a second
// signal ends the process at once; SIGKILL leaves the partial file, which plays up to its last second.
// Each run is small (32x32, one step, one thread, 4 frames/s so a fragment ends every 4 frames) and stops
// within a few seconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "build_config.h"
#include "support/ffprobe.h"
#include "support/process.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using rtvd::test::read_file;

constexpr int kFps = 4;  // a keyframe, and so an MP4 fragment, every 4 frames

// rtvd running in the background, its stdout and stderr going to files in dir; killed if still running
// when destroyed.
class Running {
 public:
  Running(const std::vector<std::string>& args, const fs::path& dir)
      : out_((dir / "stdout").string()), err_((dir / "stderr").string()) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv = {rtvd::test::rtvd_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c_argv;
    for (std::string& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    std::vector<std::string> env = rtvd::test::environment();
    std::vector<char*> c_env;
    for (std::string& e : env) c_env.push_back(e.data());
    c_env.push_back(nullptr);
    const int spawned = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, c_argv.data(), c_env.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      ADD_FAILURE() << "cannot run " << argv[0] << ": " << std::strerror(spawned);
      pid_ = 0;
    }
  }
  ~Running() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
    }
  }

  void signal(int signo) const { ::kill(pid_, signo); }

  // The wait status, or nothing when it is still running after timeout_s.
  std::optional<int> wait(double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (!exited_ && Clock::now() < deadline) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
      else std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!exited_) return std::nullopt;
    return status_;
  }

  std::string out() const { return read_file(out_); }
  std::string err() const { return read_file(err_); }

 private:
  std::string out_, err_;
  pid_t pid_ = 0;
  int status_ = 0;
  bool exited_ = false;
};

// Polls until done() or timeout_s; whether done() became true.
bool wait_until(const std::function<bool()>& done, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Whether the recording's partial file came to hold at least `frames` frames that ffprobe reads.
bool wait_for_frames(const std::string& partial, int frames, double timeout_s) {
  return wait_until(
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // ffprobe is a process: not too often
        return fs::exists(partial) && rtvd::test::ffprobe_frame_count(partial) >= frames;
      },
      timeout_s);
}

class SignalE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RTVD_HAS_LIBAV) GTEST_SKIP() << "built without FFmpeg's libraries: no video recording";
    if (!rtvd::test::ffprobe_available()) GTEST_SKIP() << "ffprobe is not installed";
    fs::create_directory(tmp_ / "logs");
  }
  std::string path(const std::string& name) const { return temp_.path(name); }

  std::unique_ptr<Running> render(const std::string& output, int frames) const {
    return std::make_unique<Running>(
        std::vector<std::string>{"render", "--device", "cpu", "--size", "32", "--steps", "1", "--threads", "1",
                                 "--fps", std::to_string(kFps), "--frames", std::to_string(frames), "-o", output},
        tmp_ / "logs");
  }

  rtvd::test::TempDir temp_{"rtvd_signal_e2e"};
  const fs::path& tmp_ = temp_.dir();
};

class StopSignalE2E : public SignalE2E, public ::testing::WithParamInterface<std::pair<int, std::string>> {};

TEST_P(StopSignalE2E, FinalisesTheRecordingAndExitsWith128PlusTheSignal) {
  const auto& [signo, name] = GetParam();
  const std::string output = path(name + ".mp4"), partial = path(name + ".partial.mp4");
  auto rtvd = render(output, 100000);
  ASSERT_TRUE(wait_for_frames(partial, kFps, 60)) << "no fragment was written:\n" << rtvd->err();
  rtvd->signal(signo);
  const auto status = rtvd->wait(10);
  ASSERT_TRUE(status.has_value()) << "still running 10 s after the signal";
  ASSERT_TRUE(WIFEXITED(*status)) << "ended by signal " << WTERMSIG(*status) << ":\n" << rtvd->err();
  EXPECT_EQ(WEXITSTATUS(*status), 128 + signo) << rtvd->err();

  const std::string out = rtvd->out(), summary = "interrupted by SIG" + name + ": wrote ";
  ASSERT_EQ(out.rfind(summary, 0), 0u) << out;
  EXPECT_NE(out.find(" to " + output + " in "), std::string::npos) << out;
  const int written = std::atoi(out.c_str() + summary.size());
  EXPECT_GE(written, kFps);
  EXPECT_EQ(rtvd::test::ffprobe_frame_count(output), written);
  EXPECT_FALSE(fs::exists(partial));
}

INSTANTIATE_TEST_SUITE_P(Signals, StopSignalE2E,
                         ::testing::Values(std::pair<int, std::string>{SIGTERM, "TERM"},
                                           std::pair<int, std::string>{SIGHUP, "HUP"},
                                           std::pair<int, std::string>{SIGINT, "INT"}),
                         [](const auto& info) { return info.param.second; });

// What progress has said so far: the largest N of its "N/TOTAL frames" lines.
int frames_reported(const std::string& err) {
  int most = 0;
  static const std::regex line("(\\d+)/\\d+ frames");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it)
    most = std::max(most, std::stoi((*it)[1]));
  return most;
}

// Progress reports every tenth of the run: with 80 frames, every 8 frames. Once it has reported n frames,
// frames 0 to n-2 are with the recorder (it takes each a frame late) and so every fragment before the last
// keyframe among them is in the file: at least n - kFps frames, all but the last second.
TEST_F(SignalE2E, KillLeavesAPartialFileThatPlaysUpToItsLastSecond) {
  const std::string output = path("k.mp4"), partial = path("k.partial.mp4");
  auto rtvd = render(output, 80);
  int reported = 0;
  ASSERT_TRUE(wait_until([&] { return (reported = frames_reported(rtvd->err())) >= 16; }, 60)) << rtvd->err();
  rtvd->signal(SIGKILL);
  const auto status = rtvd->wait(10);
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
  EXPECT_FALSE(fs::exists(output));
  EXPECT_GE(rtvd::test::ffprobe_frame_count(partial), reported - kFps) << "progress had reported " << reported;
}

// Two signals in a row, as from an impatient user or `timeout -k`: the first starts finalising, and the
// second ends the process by its default action without waiting for that. The file is then where a kill
// leaves it, and plays.
TEST_F(SignalE2E, ASecondSignalEndsTheProcessAtOnce) {
  const std::string output = path("twice.mp4"), partial = path("twice.partial.mp4");
  auto rtvd = render(output, 100000);
  ASSERT_TRUE(wait_for_frames(partial, kFps, 60)) << "no fragment was written:\n" << rtvd->err();
  rtvd->signal(SIGINT);
  rtvd->signal(SIGTERM);
  const auto status = rtvd->wait(2);
  ASSERT_TRUE(status.has_value()) << "still running 2 s after the second signal";
  // Either may be delivered first: the other one meets the default action.
  EXPECT_TRUE(WIFSIGNALED(*status) && (WTERMSIG(*status) == SIGTERM || WTERMSIG(*status) == SIGINT))
      << (WIFEXITED(*status) ? "exited with " + std::to_string(WEXITSTATUS(*status))
                             : "killed by signal " + std::to_string(WTERMSIG(*status)));
  EXPECT_GE(rtvd::test::ffprobe_frame_count(partial), kFps);
}

// Two renders to one output: the second is told that another rtvd is writing it (the first holds a lock on
// its partial file), not that the partial file is left over; the first goes on and finishes. Once a writer is
// killed, its partial file is left over, and said to be.
TEST_F(SignalE2E, TheLoserOfTwoRendersToOneOutputIsToldAnotherIsWritingIt) {
  const std::string output = path("race.mp4"), partial = path("race.partial.mp4");
  auto first = render(output, 100000);
  ASSERT_TRUE(wait_until([&] { return fs::exists(partial); }, 60)) << first->err();
  const fs::path logs = tmp_ / "second";
  fs::create_directory(logs);
  const std::vector<std::string> second = {"render", "--device", "cpu", "--size", "32", "--steps", "1",
                                           "--frames", "2", "-q", "-o", output};
  const rtvd::test::RunResult lost = rtvd::test::run_program(rtvd::test::rtvd_binary(), second,
                                                             rtvd::test::environment(), logs, 60);
  EXPECT_EQ(lost.exit_code, 1);
  EXPECT_EQ(lost.err, "rtvd: error: " + output + ": another rtvd is writing this output (into '" + partial +
                          "'): wait for it to finish, or choose another output\n");
  EXPECT_FALSE(first->wait(0).has_value()) << "the first render goes on";

  first->signal(SIGTERM);
  const auto status = first->wait(10);
  ASSERT_TRUE(status.has_value() && WIFEXITED(*status)) << first->err();
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGTERM) << first->err();
  EXPECT_GT(rtvd::test::ffprobe_frame_count(output), 0);

  auto killed = render(output, 100000);
  ASSERT_TRUE(wait_until([&] { return fs::exists(partial); }, 60)) << killed->err();
  killed->signal(SIGKILL);
  ASSERT_TRUE(killed->wait(10).has_value());
  const rtvd::test::RunResult after = rtvd::test::run_program(rtvd::test::rtvd_binary(), second,
                                                              rtvd::test::environment(), logs, 60);
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_EQ(after.err.rfind("rtvd: error: " + output + ": '" + partial + "' is left from a recording that did not "
                            "finish", 0), 0u) << after.err;
}

}  // namespace
