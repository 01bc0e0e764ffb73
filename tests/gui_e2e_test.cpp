// End to end: rtvd gui in a virtual X server (Xvfb with Mesa's software OpenGL, as in CI) for a few
// frames; the screenshot it leaves must hold the frame the headless renderer makes for the same flags,
// where the layout puts it, and the panels beside it must hold text and the overlay's plot. Also: no
// display, bad flags and bad inputs are one error line; frames recorded from the window are the frames, and a
// frame that is not finite is an error line and not recorded.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "app/gui/layout.h"
#include "build_config.h"
#include "pipeline/io/png.h"
#include "support/overflowing_model.h"
#include "support/process.h"
#include "support/test_util.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

using rtvd::test::read_file;
using Result = rtvd::test::RunResult;

// This process's environment without a display, plus extra. OpenMP threads that spin while waiting
// starve Mesa's software renderer (and each other) on a loaded 2-core machine, as under ctest -j: a
// 1-second run took 13 s. Passive waiting changes no result.
std::vector<std::string> without_display(std::vector<std::string> extra = {}) {
  extra.push_back("OMP_WAIT_POLICY=passive");
  return rtvd::test::environment({"DISPLAY", "WAYLAND_DISPLAY", "OMP_WAIT_POLICY"}, extra);
}

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', at), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(at, end - at)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    at = end + 1;
  }
  return "";
}

// Xvfb on a display number it picks itself (-displayfd: it writes the number once it accepts clients).
class VirtualDisplay {
 public:
  explicit VirtualDisplay(const fs::path& log) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const std::string fd = std::to_string(fds[1]);
    const char* argv[] = {"Xvfb", "-displayfd", fd.c_str(), "-screen", "0", "1600x1000x24",
                          "-nolisten", "tcp", nullptr};
    if (posix_spawnp(&pid_, "Xvfb", &actions, nullptr, const_cast<char* const*>(argv), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    std::string number;
    pollfd p{fds[0], POLLIN, 0};
    char c = 0;
    while (pid_ > 0 && ::poll(&p, 1, 20000) == 1 && ::read(fds[0], &c, 1) == 1 && c != '\n') number += c;
    ::close(fds[0]);
    if (!number.empty()) name_ = ":" + number;
  }
  ~VirtualDisplay() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  const std::string& name() const { return name_; }  // ":N", or empty when it did not start

 private:
  pid_t pid_ = -1;
  std::string name_;
};

class GuiE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(temp_.dir() / "logs");
  }
  std::string path(const std::string& name) const { return temp_.path(name); }
  Result run(const std::vector<std::string>& args, const std::vector<std::string>& env = without_display()) const {
    return rtvd::test::run_program(rtvd::test::rtvd_binary(), args, env, temp_.dir() / "logs", 120);
  }

  rtvd::test::TempDir temp_{"rtvd_gui_e2e"};
};

void expect_one_error_line(const Result& r, const std::string& mentions) {
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("rtvd: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
}

TEST_F(GuiE2E, WithoutADisplayTheGuiPointsAtRenderAndPlainRtvdPrintsHelp) {
  expect_one_error_line(run({"gui", "--device", "cpu"}), "'rtvd render'");
  const Result plain = run({});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("usage: rtvd <command>"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("gui"), std::string::npos) << plain.out;
}

TEST_F(GuiE2E, BadFlagsAreOneErrorLineBeforeAnythingOpens) {
  expect_one_error_line(run({"gui", "--budget-ms", "0"}), "flag '--budget-ms': expected a number > 0, got 0");
  expect_one_error_line(run({"gui", "--frobnicate"}), "unknown flag '--frobnicate' for 'rtvd gui'");
  const Result help = run({"gui", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--screenshot FILE.png"), std::string::npos) << help.out;
}

// The window, under Xvfb. Skipped only where it cannot run at all: a build without the GUI, or no Xvfb.
class GuiUnderXvfb : public GuiE2E {
 protected:
  void SetUp() override {
    GuiE2E::SetUp();
    if (!RTVD_HAS_GUI)
      GTEST_SKIP() << "this build has no GUI (RTVD_WITH_GUI off, or GLFW, Dear ImGui or OpenGL not found)";
    if (find_program("Xvfb").empty()) GTEST_SKIP() << "Xvfb is not installed (apt-get install xvfb)";
    display_ = std::make_unique<VirtualDisplay>(temp_.dir() / "logs/xvfb.log");
    ASSERT_FALSE(display_->name().empty()) << "Xvfb did not start:\n" << read_file(temp_.dir() / "logs/xvfb.log");
  }
  std::vector<std::string> display_env() const { return without_display({"DISPLAY=" + display_->name()}); }

  std::unique_ptr<VirtualDisplay> display_;
};

TEST_F(GuiUnderXvfb, BadInputsAndNoOpenGL33FailInOneLine) {
  expect_one_error_line(run({"gui", "--device", "cpu", "--class", "no-such-class"}, display_env()), "no-such-class");
  expect_one_error_line(run({"gui", "--device", "cpu", "--model", path("no_model")}, display_env()), path("no_model"));
  expect_one_error_line(run({"gui", "--device", "cpu", "--source", "webcam:9"}, display_env()),
                        RTVD_HAS_OPENCV ? "/dev/video9" : "need");
  // A GL that cannot give a 3.3 core context (Mesa told to offer 3.0): a clear line, no crash.
  std::vector<std::string> gl30 = display_env();
  gl30.push_back("MESA_GL_VERSION_OVERRIDE=3.0");
  expect_one_error_line(run({"gui", "--device", "cpu", "--size", "32"}, gl30), "cannot open an OpenGL 3.3 core window");
}

struct Pixel {
  int r, g, b;
};
Pixel at(const rtvd::ImageRgba8& image, int x, int y) {
  const uint8_t* p = &image.pixels[(size_t(y) * image.width + x) * 4];
  return {p[0], p[1], p[2]};
}

// Text-coloured (ImGui's white text) and distinct colours in a panel: it was drawn, and not blank.
void expect_panel_drawn(const rtvd::ImageRgba8& shot, const rtvd::gui::Rect& r, const char* name) {
  int text = 0;
  std::set<int> colours;
  for (int y = r.y; y < r.y + r.h; ++y)
    for (int x = r.x; x < r.x + r.w; ++x) {
      const Pixel p = at(shot, x, y);
      text += std::min({p.r, p.g, p.b}) >= 200;
      colours.insert(p.r << 16 | p.g << 8 | p.b);
    }
  EXPECT_GT(text, 300) << name << ": text pixels";
  EXPECT_GT(colours.size(), 16u) << name << ": distinct colours";
}

// The frame region of a 1280x720 screenshot with nearest filtering against a headless frame of `side` x `side`:
// the centre of each texel's footprint shows that texel exactly, and the region is not flat.
void expect_frame_shown(const rtvd::ImageRgba8& shot, const rtvd::ImageRgba8& frame, int side) {
  const rtvd::gui::Rect f = rtvd::gui::layout_window(1280, 720, true, true, side, side).frame;
  int worst = 0, lo = 255, hi = 0;
  for (int ty = 0; ty < side; ++ty)
    for (int tx = 0; tx < side; ++tx) {
      const Pixel s = at(shot, f.x + (2 * tx + 1) * f.w / (2 * side), f.y + (2 * ty + 1) * f.h / (2 * side));
      const Pixel e = at(frame, tx, ty);
      worst = std::max({worst, std::abs(s.r - e.r), std::abs(s.g - e.g), std::abs(s.b - e.b)});
      lo = std::min({lo, s.r, s.g, s.b});
      hi = std::max({hi, s.r, s.g, s.b});
    }
  EXPECT_LE(worst, 1) << "the frame region differs from the headless frame";
  EXPECT_GT(hi - lo, 40) << "the frame region is flat (blank or black)";
}

TEST_F(GuiUnderXvfb, ScreenshotHoldsTheRenderedFrameAndTheOverlayAndRecordingWritesTheFrames) {
  const std::vector<std::string> common = {"--device", "cpu", "--size", "32", "--seed", "7", "--steps", "2",
                                           "--frames", "5"};
  std::vector<std::string> gui = {"gui", "--screenshot", path("shot.png"), "--record", path("rec/"), "--filter",
                                  "nearest", "--window", "1280x720", "--no-vsync"};
  gui.insert(gui.end(), common.begin(), common.end());
  const Result g = run(gui, display_env());
  ASSERT_EQ(g.exit_code, 0) << "stdout:\n" << g.out << "stderr:\n" << g.err;
  EXPECT_NE(g.err.find("rtvd gui: 5 frames, display path: host upload"), std::string::npos) << g.err;

  std::vector<std::string> render = {"render", "-q", "-o", path("frames/")};
  render.insert(render.end(), common.begin(), common.end());
  const Result h = run(render);
  ASSERT_EQ(h.exit_code, 0) << h.err;
  const rtvd::ImageRgba8 last = rtvd::read_png(path("frames/frame_00004.png"));

  const rtvd::ImageRgba8 shot = rtvd::read_png(path("shot.png"));
  ASSERT_EQ(shot.width, 1280);
  ASSERT_EQ(shot.height, 720);
  const rtvd::gui::Layout layout = rtvd::gui::layout_window(1280, 720, true, true, 32, 32);
  expect_frame_shown(shot, last, 32);

  expect_panel_drawn(shot, layout.controls, "controls panel");
  expect_panel_drawn(shot, layout.overlay, "timing overlay");
  int budget_line = 0;  // the red budget line of the overlay's frame-time plot
  for (int y = 0; y < 720; ++y)
    for (int x = layout.overlay.x; x < 1280; ++x) {
      const Pixel p = at(shot, x, y);
      budget_line += p.r > 200 && p.g < 130 && p.b < 130;
    }
  EXPECT_GT(budget_line, 100) << "the budget line of the frame-time plot";

  // Recording: frames written + dropped = frames generated; the first recorded frame is the first frame.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(g.err, m, std::regex("recorded (\\d+) frames to .* \\((\\d+) dropped\\)"))) << g.err;
  const int written = std::stoi(m[1]), dropped = std::stoi(m[2]);
  EXPECT_EQ(written + dropped, 5);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path("rec"))) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(int(files.size()), written);
  ASSERT_GE(written, 1);
  EXPECT_EQ(rtvd::read_png(files.front().string()).pixels, rtvd::read_png(path("frames/frame_00000.png")).pixels);
}

// A frame that is not finite (support/overflowing_model.h's second frame) is reported once, as an error line,
// and not recorded; the frames after it start over and are recorded.
TEST_F(GuiUnderXvfb, AFrameThatIsNotFiniteIsReportedAndNotRecorded) {
  if (!RTVD_HAS_LIBAV || !RTVD_HAS_OPENCV) GTEST_SKIP() << "needs FFmpeg's libraries and OpenCV for video";
  const rtvd::test::OverflowingModel m = rtvd::test::write_overflowing_model(temp_.dir());
  const Result g = run({"gui", "--device", "cpu", "--model", m.model, "--source", "video:" + m.video, "--strength",
                        "0.001", "--steps", "1", "--size", "32", "--frames", "4", "--record", path("rec/"),
                        "--no-vsync"},
                       display_env());
  ASSERT_EQ(g.exit_code, 0) << "stdout:\n" << g.out << "stderr:\n" << g.err;
  const std::string line = "rtvd gui: frame 1 is not finite (NaN or Inf in the model's output): lower --guidance or "
                           "a --lora scale, or the checkpoint holds values too large for fp32\n";
  EXPECT_NE(g.err.find(line), std::string::npos) << g.err;
  EXPECT_EQ(g.err.find("is not finite"), g.err.rfind("is not finite")) << "once:\n" << g.err;
  std::smatch r;
  ASSERT_TRUE(std::regex_search(g.err, r, std::regex("recorded (\\d+) frames to .* \\((\\d+) dropped\\)"))) << g.err;
  EXPECT_EQ(std::stoi(r[1]) + std::stoi(r[2]), 3) << "frames 0, 2 and 3";
  EXPECT_EQ(std::distance(fs::directory_iterator(path("rec")), fs::directory_iterator()), std::stoi(r[1]));
}

// An SD model in the window: a diffusers folder with its prompt (the controls then hold the prompt boxes and
// the sampler), decoded by its VAE; the window shows the frame rtvd render makes for the same flags.
TEST_F(GuiUnderXvfb, AnSdModelWithAPromptShowsTheRenderedFrame) {
  const std::vector<std::string> common = {"--device", "cpu", "--model", rtvd::test::test_data("tiny_sd"), "--prompt",
                                           "a watercolor fox", "--seed", "7", "--steps", "2", "--guidance", "0",
                                           "--frames", "3"};
  std::vector<std::string> gui = {"gui", "--screenshot", path("sd.png"), "--filter", "nearest", "--window", "1280x720",
                                  "--no-vsync"};
  gui.insert(gui.end(), common.begin(), common.end());
  const Result g = run(gui, display_env());
  ASSERT_EQ(g.exit_code, 0) << "stdout:\n" << g.out << "stderr:\n" << g.err;
  std::vector<std::string> render = {"render", "-q", "-o", path("sd_frames/")};
  render.insert(render.end(), common.begin(), common.end());
  const Result h = run(render);
  ASSERT_EQ(h.exit_code, 0) << h.err;
  const rtvd::ImageRgba8 shot = rtvd::read_png(path("sd.png"));
  ASSERT_EQ(shot.width, 1280);
  expect_frame_shown(shot, rtvd::read_png(path("sd_frames/frame_00002.png")), 64);
  expect_panel_drawn(shot, rtvd::gui::layout_window(1280, 720, true, true, 64, 64).controls, "controls panel");
}

}  // namespace
