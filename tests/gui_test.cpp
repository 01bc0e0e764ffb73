// The GUI's parts that have logic and no GL: the recording queue and recorder thread, the layout and
// aspect fit, the frame statistics and rolling profile, the controls' commands, the op
// implementations the overlay lists, and the gui command's flags. (The window itself: gui_e2e_test.)
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <imgui.h>
#include <imgui_internal.h>

#include "app/cli.h"
#include "app/controlnet_flags.h"
#include "app/gui/bounded_queue.h"
#include "app/gui/control_views.h"
#include "app/gui/controls.h"
#include "app/gui/frame_stats.h"
#include "app/gui/implementations.h"
#include "app/gui/layout.h"
#include "app/gui/recording.h"
#include "app/gui/shortcuts.h"
#include "pipeline/engine.h"
#include "support/test_util.h"
#include "base/error.h"

namespace rtvd::gui {
namespace {

TEST(BoundedQueue, DropsAndCountsWhenFullAndKeepsOrder) {
  BoundedQueue<int> q(3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q.push(i), i < 3) << i;
  EXPECT_EQ(q.dropped(), 2);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.pop(), 0);
  EXPECT_TRUE(q.push(5)) << "room again after a pop";
  q.close();
  EXPECT_FALSE(q.push(6)) << "closed";
  EXPECT_EQ(q.dropped(), 2) << "a push after close is refused, not counted as a drop";
  EXPECT_EQ(q.pop(), 1);
  EXPECT_EQ(q.pop(), 2);
  EXPECT_EQ(q.pop(), 5);
  EXPECT_EQ(q.pop(), std::nullopt) << "closed and drained";
}

TEST(BoundedQueue, EveryPushIsEitherConsumedOrCountedUnderContention) {
  BoundedQueue<int> q(8);
  std::vector<int> got;
  std::thread consumer([&] {
    while (auto v = q.pop()) got.push_back(*v);
  });
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) accepted += q.push(i);
  q.close();
  consumer.join();
  EXPECT_EQ(int(got.size()), accepted);
  EXPECT_EQ(accepted + q.dropped(), 20000);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end())) << "FIFO";
}

// A recorder that blocks in write() until released, so the queue in front of it fills.
class GatedRecorder : public Recorder {
 public:
  void write(const ImageRgba8& frame) override {
    std::unique_lock<std::mutex> lock(mutex_);
    open_.wait(lock, [&] { return released_; });
    if (fail_) throw Error("disk full");
    values_.push_back(frame.pixels.at(0));
  }
  void finish() override { finished_ = true; }
  const std::string& path() const override { return path_; }
  int frames_written() const override { return int(values_.size()); }
  const std::string& codec() const override { return path_; }
  void release(bool fail = false) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
      fail_ = fail;
    }
    open_.notify_all();
  }

  std::vector<uint8_t> values_;
  bool finished_ = false;

 private:
  std::mutex mutex_;
  std::condition_variable open_;
  bool released_ = false, fail_ = false;
  std::string path_ = "gated";
};

ImageRgba8 frame_with(uint8_t value) { return {1, 1, {value, 0, 0, 255}}; }

TEST(Recording, ASlowRecorderDropsFramesInsteadOfBlockingAndCountsThem) {
  auto owned = std::make_unique<GatedRecorder>();
  GatedRecorder& recorder = *owned;
  Recording recording(std::move(owned), 8);
  for (int i = 0; i < 30; ++i) recording.submit(frame_with(uint8_t(i)));  // returns at once: the writer is stuck
  EXPECT_EQ(recording.submitted(), 30);
  EXPECT_GE(recording.dropped(), 30 - 8 - 1) << "8 queued, at most one taken by the blocked writer";
  recorder.release();
  recording.finish();
  EXPECT_TRUE(recorder.finished_);
  EXPECT_EQ(recording.written() + recording.dropped(), 30);
  EXPECT_EQ(int(recorder.values_.size()), recording.written());
  EXPECT_TRUE(std::is_sorted(recorder.values_.begin(), recorder.values_.end()));
  EXPECT_EQ(recorder.values_.front(), 0) << "the first frame is never dropped";
  EXPECT_EQ(recording.error(), "");
}

TEST(Recording, AFailedWriteIsReportedAndTheFileIsNotFinished) {
  auto owned = std::make_unique<GatedRecorder>();
  GatedRecorder& recorder = *owned;
  Recording recording(std::move(owned), 8);
  recording.submit(frame_with(1));
  recorder.release(true);
  for (int i = 0; i < 1000 && recording.error().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(recording.error(), "disk full");
  recording.submit(frame_with(2));  // refused: the writer has stopped
  try {
    recording.finish();
    FAIL() << "expected the write error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "disk full");
  }
  EXPECT_FALSE(recorder.finished_);
}

TEST(Layout, FitKeepsTheAspectRatioAndCentres) {
  EXPECT_EQ(fit_rect(64, 64, {300, 0, 600, 720}), (Rect{300, 60, 600, 600}));
  EXPECT_EQ(fit_rect(96, 64, {0, 0, 100, 100}), (Rect{0, 16, 100, 67}));
  EXPECT_EQ(fit_rect(64, 96, {10, 20, 100, 100}), (Rect{26, 20, 67, 100}));
  EXPECT_EQ(fit_rect(32, 32, {0, 0, 32, 32}), (Rect{0, 0, 32, 32}));
  EXPECT_EQ(fit_rect(64, 64, {5, 5, 0, 100}).w, 0) << "nothing to fit into";
  for (int w = 1; w < 300; w += 7)
    for (int h = 1; h < 300; h += 11) {
      const Rect area{3, 4, w, h};
      const Rect r = fit_rect(37, 23, area);
      ASSERT_TRUE(r.w >= 1 && r.h >= 1 && r.x >= area.x && r.y >= area.y && r.x + r.w <= area.x + area.w &&
                  r.y + r.h <= area.y + area.h)
          << w << "x" << h;
      ASSERT_TRUE(r.w == w || r.h == h) << "touches two sides: " << w << "x" << h;
    }
}

TEST(Layout, PanelsBesideTheViewAndHiddenOnes) {
  const Layout l = layout_window(1280, 720, true, true, 64, 64);
  EXPECT_EQ(l.controls, (Rect{0, 0, kControlsWidth, 720}));
  EXPECT_EQ(l.overlay, (Rect{1280 - kOverlayWidth, 0, kOverlayWidth, 720}));
  EXPECT_EQ(l.view, (Rect{kControlsWidth, 0, 1280 - kControlsWidth - kOverlayWidth, 720}));
  EXPECT_EQ(l.frame, fit_rect(64, 64, l.view));

  const Layout bare = layout_window(1280, 720, false, false, 64, 64);
  EXPECT_EQ(bare.controls.w, 0);
  EXPECT_EQ(bare.overlay.w, 0);
  EXPECT_EQ(bare.view, (Rect{0, 0, 1280, 720}));
  EXPECT_EQ(bare.frame, (Rect{280, 0, 720, 720}));

  const Layout narrow = layout_window(600, 400, true, true, 64, 64);
  EXPECT_EQ(narrow.controls.w, 200);
  EXPECT_EQ(narrow.overlay.w, 200);
  EXPECT_EQ(narrow.view.w, 200) << "a third stays for the frame";
}

// Fresh random runs of frames, some after a pause (no interval): the overlay's frames/s and ms per frame are
// one mean interval, over the frames of the last second (at least the newest), and the exit line's the same
// over the run; each checked against the intervals summed here.
TEST(FrameStats, FramesPerSecondAndFrameTimeAreOneMeanInterval) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int run = 0; run < 50; ++run) {
    const double scale_ms = std::pow(10.0, rng.uniform(0.0f, 3.5f));  // 1 ms to 3 s per frame
    FrameStats s;
    std::vector<std::pair<double, double>> intervals;  // (frame's time s, ms)
    double now = rng.uniform(0.0f, 100.0f);
    s.add_frame(now, -1);  // the first frame
    const int frames = rng.integer(2, 400);
    for (int i = 1; i < frames; ++i) {
      const double ms = scale_ms * rng.uniform(0.5f, 1.5f);
      now += ms / 1e3;
      const bool after_pause = rng.integer(0, 20) == 0;
      s.add_frame(now, after_pause ? -1.0 : ms);
      if (!after_pause) intervals.emplace_back(now, ms);
    }
    EXPECT_EQ(s.frames(), frames);
    EXPECT_EQ(s.intervals().size(), std::min(intervals.size(), FrameStats::kHistory));
    if (intervals.empty()) {
      EXPECT_EQ(s.recent().intervals, 0);
      EXPECT_EQ(s.run().frames_per_s, 0.0);
      continue;
    }
    double window_ms = 0, run_ms = 0;
    int window = 0;
    for (const auto& [at, ms] : intervals) {
      run_ms += ms;
      if (at >= intervals.back().first - 1.0) window_ms += ms, ++window;
    }
    const FrameRate recent = s.recent(), whole = s.run();
    ASSERT_EQ(recent.intervals, window);
    EXPECT_NEAR(recent.ms, window_ms / window, 1e-9 * recent.ms);
    EXPECT_NEAR(recent.frames_per_s, 1e3 / recent.ms, 1e-9 * recent.frames_per_s);
    EXPECT_NEAR(recent.seconds, window_ms / 1e3, 1e-9 * recent.seconds);
    EXPECT_EQ(whole.intervals, int(intervals.size()));
    EXPECT_NEAR(whole.ms, run_ms / double(intervals.size()), 1e-9 * whole.ms);
    EXPECT_NEAR(whole.frames_per_s, 1e3 / whole.ms, 1e-9 * whole.frames_per_s);
  }
}

// The CPU case of issue 25: frames 2804 ms apart are 0.357 frames/s in the overlay and at exit alike.
TEST(FrameStats, SlowFramesAreAFractionOfAFramePerSecond) {
  FrameStats s;
  s.add_frame(0.0, -1);
  for (int i = 1; i <= 3; ++i) s.add_frame(2.804 * i, 2804.0);
  EXPECT_EQ(s.recent().intervals, 1) << "the newest interval alone: it is longer than the window";
  EXPECT_EQ(three_digits(s.recent().frames_per_s), "0.357");
  EXPECT_EQ(three_digits(s.recent().ms), "2804");
  EXPECT_EQ(three_digits(s.run().frames_per_s), "0.357");
}

TEST(FrameStats, GpuTimeMean) {
  FrameStats s;
  EXPECT_EQ(s.mean_gpu_ms(), 0.0);
  s.add_gpu_ms(2.0);
  s.add_gpu_ms(4.0);
  EXPECT_DOUBLE_EQ(s.mean_gpu_ms(), 3.0);
  EXPECT_EQ(s.gpu_ms().size(), 2u);
}

std::vector<Op> two_ops() {
  Op conv{"down.conv", ConvOp{}, 1e6, 0};
  Op norm{"down.norm", GroupNormOp{}, 0, 1e3};
  return {conv, norm};
}

TEST(RollingProfile, SamplesFillWindowsThatRoll) {
  RollingProfile p;
  const std::vector<Op> ops = two_ops();
  EXPECT_FALSE(p.add(ops, {})) << "no frame timed since the last call";
  EXPECT_FALSE(p.add(ops, {1.0f})) << "times of another plan";
  EXPECT_TRUE(p.add(ops, {1.0f, 2.0f}));
  EXPECT_DOUBLE_EQ(p.last_frame_ms(), 3.0);
  EXPECT_EQ(p.shown().frames(), 1) << "the filling window, before one is full";
  for (int i = 1; i < RollingProfile::kWindow; ++i) ASSERT_TRUE(p.add(ops, {1.0f + i, 2.0f}));
  EXPECT_EQ(p.shown().frames(), RollingProfile::kWindow);
  EXPECT_TRUE(p.add(ops, {100.0f, 2.0f}));
  EXPECT_EQ(p.shown().frames(), RollingProfile::kWindow) << "the full window stays shown while the next fills";
  EXPECT_EQ(p.shown().by_type().front().type, "conv2d");
  p.reset();
  EXPECT_EQ(p.shown().frames(), 0);
  EXPECT_TRUE(p.add(ops, {100.0f, 2.0f}));
  EXPECT_EQ(p.shown().frames(), 1) << "after a reset the window starts over";
}

// The controls panel drawn headless (ImGui without a window or GL: the default font, the app's style) in the
// panel's rect of a window of the given size, three frames so that the scrollbar settles. Returns what is cut:
// each item (label, button) reaching past the panel's content, and each glyph drawn in part (a text cut by a
// frame or the panel).
std::vector<std::string> clipped_in_controls(int width, int height, bool sd_model) {
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(float(width), float(height));
  io.DeltaTime = 1.0f / 60;
  unsigned char* pixels = nullptr;
  int atlas_w = 0, atlas_h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &atlas_w, &atlas_h);
  ImGui::StyleColorsDark();

  const std::vector<std::string> classes = {"smileys", "people", "animals", "activities", "components"};
  const std::vector<Message> messages;
  ControlsInfo info;
  info.class_names = sd_model ? nullptr : &classes;
  info.has_text_encoder = sd_model;
  info.native_sampler = sd_model ? "euler" : nullptr;
  info.source = "noise walk";
  info.messages = &messages;
  if (sd_model) info.controlnets = {"control_v11p_sd15_canny", "control_v11f1p_sd15_depth.safetensors"};
  if (sd_model) info.control_views = {reinterpret_cast<void*>(1), reinterpret_cast<void*>(2)};  // texture ids
  ControlsState state;
  if (sd_model) state.settings.controlnets = {{.preprocessor = ControlPreprocessor::Canny}, {}};
  state.source.kind = sd_model ? SourceKind::Video : SourceKind::Webcam;  // the path box, or the device number
  state.prompts.prompt_to = sd_model ? "" : "x";
  state.record_path = "";
  const Layout layout = layout_window(width, height, true, true, 64, 64);
  std::vector<std::string> clipped;
  for (int frame = 0; frame < 3; ++frame) {
    ImGui::NewFrame();
    Requests requests;
    draw_controls(layout.controls, state, info, requests);
    ImGui::Render();
  }
  const ImGuiWindow* panel = ImGui::FindWindowByName("Controls");
  if (panel && panel->DC.CursorMaxPos.x > panel->WorkRect.Max.x + 0.5f)
    clipped.push_back(cat("an item reaches ", panel->DC.CursorMaxPos.x - panel->WorkRect.Max.x, " px past the panel"));

  // Glyph quads: two triangles (a, a+1, a+2), (a, a+2, a+3) whose texture corners are a glyph's.
  const ImFont* font = io.Fonts->Fonts[0];
  const ImDrawData* draw = ImGui::GetDrawData();
  for (int l = 0; l < draw->CmdListsCount; ++l) {
    const ImDrawList* list = draw->CmdLists[l];
    for (const ImDrawCmd& cmd : list->CmdBuffer) {
      for (unsigned i = cmd.IdxOffset; i + 5 < cmd.IdxOffset + cmd.ElemCount; i += 3) {
        const ImDrawIdx* x = &list->IdxBuffer[int(i)];
        if (!(x[1] == x[0] + 1 && x[2] == x[0] + 2 && x[3] == x[0] && x[4] == x[0] + 2 && x[5] == x[0] + 3)) continue;
        const ImDrawVert* v = &list->VtxBuffer[int(cmd.VtxOffset + x[0])];
        for (const ImFontGlyph& g : font->Glyphs) {
          const bool inside = v[0].uv.x >= g.U0 && v[0].uv.x <= g.U1 && v[0].uv.y >= g.V0 && v[0].uv.y <= g.V1 &&
                              v[2].uv.x >= g.U0 && v[2].uv.x <= g.U1 && v[2].uv.y >= g.V0 && v[2].uv.y <= g.V1;
          if (!inside || g.U0 == g.U1) continue;
          const bool cut_by_cpu = v[0].uv.x != g.U0 || v[2].uv.x != g.U1;
          const bool cut_by_clip = v[2].pos.x > cmd.ClipRect.z + 0.5f || v[0].pos.x < cmd.ClipRect.x - 0.5f;
          if (cut_by_cpu || cut_by_clip)
            clipped.push_back(cat("'", char(g.Codepoint), "' at x ", v[0].pos.x, " in ", list->_OwnerName));
          break;
        }
        i += 3;
      }
    }
  }
  ImGui::DestroyContext();
  return clipped;
}

// At every window size from the smallest the GUI opens, for both kinds of model: no label, button, hint or
// value is cut ("guidanc", the negative prompt's hint were).
TEST(Controls, NothingIsCutAtAnyWindowSize) {
  for (const bool sd : {false, true})
    for (int width = kMinWindowWidth; width <= 1400; width += 8)
      for (const int height : {kMinWindowHeight, 720}) {
        const std::vector<std::string> clipped = clipped_in_controls(width, height, sd);
        std::string list;
        for (const std::string& c : clipped) list += "\n  " + c;
        EXPECT_TRUE(clipped.empty()) << (sd ? "SD model" : "default model") << " at " << width << "x" << height << list;
      }
}

TEST(Controls, CommandsEditTheStateOrRequest) {
  ControlsState s;
  Requests r;
  apply_command(Command::Pause, s, r, 3);
  EXPECT_TRUE(s.paused);
  apply_command(Command::Pause, s, r, 3);
  EXPECT_FALSE(s.paused);
  apply_command(Command::Step, s, r, 3);
  EXPECT_TRUE(s.paused && r.step) << "single-step pauses";
  apply_command(Command::PrevClass, s, r, 3);
  EXPECT_EQ(s.settings.class_id, 2) << "wraps around";
  apply_command(Command::NextClass, s, r, 3);
  EXPECT_EQ(s.settings.class_id, 0);
  apply_command(Command::NextClass, s, r, 0);
  EXPECT_EQ(s.settings.class_id, 0) << "a model without classes";
  apply_command(Command::Overlay, s, r, 3);
  apply_command(Command::Filter, s, r, 3);
  EXPECT_FALSE(s.show_overlay);
  EXPECT_FALSE(s.linear);
  apply_command(Command::Record, s, r, 3);
  apply_command(Command::Screenshot, s, r, 3);
  apply_command(Command::Reset, s, r, 3);
  apply_command(Command::Quit, s, r, 3);
  EXPECT_TRUE(r.record && r.screenshot && r.reset && r.quit);
}

TEST(Shortcuts, EveryCommandHasAKeyAndKeysAreUnique) {
  for (int c = 0; c <= int(Command::Quit); ++c)
    EXPECT_NE(with_key("x", Command(c)), "x") << "command " << c << " has no shortcut";
  const auto& table = shortcuts();
  for (size_t i = 0; i < table.size(); ++i)
    for (size_t j = i + 1; j < table.size(); ++j)
      EXPECT_FALSE(table[i].key == table[j].key && table[i].ctrl == table[j].ctrl) << table[i].keys;
  EXPECT_EQ(with_key("pause", Command::Pause), "pause  [Space]");
}

TEST(Shortcuts, KeyPressesBecomeCommandsInOrderWithCtrlTellingApart) {
  const auto key_of = [](Command c, bool ctrl) {
    for (const Shortcut& s : shortcuts())
      if (s.command == c && s.ctrl == ctrl) return s.key;
    return -1;
  };
  const int r = key_of(Command::Reset, false);
  ASSERT_EQ(key_of(Command::Record, true), r) << "R and Ctrl+R share a key";
  const std::vector<Window::KeyPress> presses = {
      {r, true}, {r, false}, {-7, false}, {key_of(Command::Pause, false), false}};
  EXPECT_EQ(commands_of(presses), (std::vector<Command>{Command::Record, Command::Reset, Command::Pause}));
}

TEST(Implementations, EveryOpTypeOfAFrameIsNamed) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.width = o.height = 32;
  Engine engine(o);
  const auto impls = implementations_by_type(engine.plan().graph.frame, engine.backend());
  for (const Op& op : engine.plan().graph.frame) {
    const auto it = impls.find(op_type_name(op.body));
    ASSERT_NE(it, impls.end()) << op_type_name(op.body);
    EXPECT_FALSE(it->second.empty()) << op_type_name(op.body);
  }
}

}  // namespace
}  // namespace rtvd::gui

namespace rtvd::cli {
namespace {

std::string gui_error(const std::vector<std::string>& args) {
  try {
    parse_gui_options(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GuiFlags, DefaultsAndEveryFlag) {
  const GuiOptions d = parse_gui_options({});
  EXPECT_FALSE(d.frames.has_value());
  EXPECT_EQ(d.screenshot, "");
  EXPECT_EQ(d.record, "");
  EXPECT_EQ(d.fps, 24.0);
  EXPECT_EQ(d.budget_ms, 40.0);
  EXPECT_EQ(d.window.width, 1280);
  EXPECT_EQ(d.window.height, 720);
  EXPECT_TRUE(d.linear_filter);
  EXPECT_TRUE(d.vsync);
  EXPECT_EQ(d.frame.steps, 4) << "the generation defaults are render's";

  const GuiOptions o = parse_gui_options({"-n", "5", "--screenshot", "s.png", "--record=r/", "--fps", "12",
                                          "--budget-ms", "16.7", "--window", "800x600", "--filter", "nearest",
                                          "--no-vsync", "--seed", "9", "--steps", "2", "--device", "cpu",
                                          "--size", "32", "--class", "cat", "--source", "webcam:1"});
  EXPECT_EQ(o.frames, 5);
  EXPECT_EQ(o.screenshot, "s.png");
  EXPECT_EQ(o.record, "r/");
  EXPECT_EQ(o.fps, 12.0);
  EXPECT_EQ(o.budget_ms, 16.7);
  EXPECT_EQ(o.window.width, 800);
  EXPECT_EQ(o.window.height, 600);
  EXPECT_FALSE(o.linear_filter);
  EXPECT_FALSE(o.vsync);
  EXPECT_EQ(o.frame.seed, 9u);
  EXPECT_EQ(o.frame.steps, 2);
  EXPECT_EQ(o.engine.device, DeviceKind::Cpu);
  EXPECT_EQ(o.engine.width, 32);
  EXPECT_EQ(o.class_name, "cat");
  EXPECT_EQ(o.source, (SourceSpec{SourceKind::Webcam, "", 1}));
  EXPECT_TRUE(parse_gui_options({"--filter", "linear"}).linear_filter);
  EXPECT_TRUE(parse_gui_options({"--window", "0", "-h"}).help) << "help before values are checked";
}

TEST(GuiFlags, Errors) {
  EXPECT_EQ(gui_error({"--output", "x.mp4"}), "unknown flag '--output' for 'rtvd gui' (see rtvd gui --help)");
  EXPECT_EQ(gui_error({"x"}), "unexpected argument 'x' for 'rtvd gui' (see rtvd gui --help)");
  EXPECT_EQ(gui_error({"--budget-ms", "0"}), "flag '--budget-ms': expected a number > 0, got 0");
  EXPECT_EQ(gui_error({"--frames", "0"}), "flag '--frames': expected an integer >= 1, got 0");
  EXPECT_EQ(gui_error({"--window", "wide"}), "flag '--window': expected WxH or N with positive integers, got 'wide'");
  EXPECT_EQ(gui_error({"--filter", "cubic"}), "flag '--filter': expected linear or nearest, got 'cubic'");
  EXPECT_EQ(gui_error({"--screenshot="}), "flag '--screenshot': expected a path, got ''");
  EXPECT_EQ(gui_error({"--steps", "0"}), "flag '--steps': expected an integer in [1, 100], got 0");
  EXPECT_EQ(gui_error({"--no-vsync=1"}), "flag '--no-vsync' takes no value");
}

TEST(GuiFlags, ScreenshotsArePngAndWindowsAreBounded) {
  for (const char* path : {"x.jpg", "shot", "out/x.png.jpg", "x.pngx"})
    EXPECT_EQ(gui_error({"--screenshot", path}),
              cat("flag '--screenshot': expected a .png file (screenshots are written as PNG), got '", path, "'"));
  EXPECT_EQ(parse_gui_options({"--screenshot", "out/Shot.PNG"}).screenshot, "out/Shot.PNG");

  EXPECT_EQ(gui_error({"--window", "100000x100000"}),
            "flag '--window': expected at most 16384 per side, got '100000x100000'");
  EXPECT_EQ(gui_error({"--window", "640x16385"}), "flag '--window': expected at most 16384 per side, got '640x16385'");
  EXPECT_EQ(gui_error({"--window", "16385"}), "flag '--window': expected at most 16384 per side, got '16385'");
  const GuiOptions largest = parse_gui_options({"--window", "16384x450"});
  EXPECT_EQ(largest.window.width, gui::kMaxWindowSide);
  EXPECT_EQ(largest.window.height, gui::kMinWindowHeight);
  // Below the smallest window the controls' labels are cut (Controls.NothingIsCutAtAnyWindowSize).
  const GuiOptions smallest = parse_gui_options({"--window", "800x450"});
  EXPECT_EQ(smallest.window.width, gui::kMinWindowWidth);
  EXPECT_EQ(smallest.window.height, gui::kMinWindowHeight);
  for (const char* small : {"16384x1", "799x450", "800x449", "600"})
    EXPECT_EQ(gui_error({"--window", small}),
              cat("flag '--window': expected at least 800x450 (the panels' labels need it), got '", small, "'"));
}

// A control image to the view's RGBA8: values in [0, 1] to bytes, clamped, one channel as grey, else the first
// three, alpha opaque, a NaN black.
TEST(ControlViews, ImagesBecomeRgba) {
  std::vector<uint8_t> rgba = {7};
  gui::control_image_rgba({0.0f, 0.5f, 1.0f, 2.0f, -1.0f, NAN}, 3, rgba);
  EXPECT_EQ(rgba, (std::vector<uint8_t>{0, 128, 255, 255, 255, 0, 0, 255}));
  gui::control_image_rgba({0.25f, 1.5f}, 1, rgba);
  EXPECT_EQ(rgba, (std::vector<uint8_t>{64, 64, 64, 255, 255, 255, 255, 255}));
  gui::control_image_rgba({0.1f, 0.2f, 0.3f, 0.4f}, 4, rgba);
  EXPECT_EQ(rgba, (std::vector<uint8_t>{26, 51, 77, 255}));
}

// rtvd gui takes render's ControlNet flags: each net's path, settings and control source, in order.
TEST(GuiFlags, ControlNetsAsRender) {
  const GuiOptions o = parse_gui_options({"--source", "webcam", "--controlnet", "a:0.5", "--control", "canny", "--canny",
                                          "10:20", "--controlnet", "b", "--control", "video:d.mp4", "--control-end",
                                          "0.5"});
  ASSERT_EQ(o.controlnets.size(), 2u);
  EXPECT_EQ(o.engine.model.controlnets, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(o.frame.controlnets.size(), 2u);
  EXPECT_EQ(o.frame.controlnets[0].scale, 0.5f);
  EXPECT_EQ(o.frame.controlnets[0].preprocessor, ControlPreprocessor::Canny);
  EXPECT_EQ(o.frame.controlnets[0].canny_low, 10);
  EXPECT_EQ(o.frame.controlnets[1].end, 0.5);
  ASSERT_TRUE(o.controlnets[1].control);
  EXPECT_EQ(o.controlnets[1].control->kind, SourceKind::Video);
  for (const auto* table : {&render_flags(), &gui_flags()})
    for (const FlagSpec& c : controlnet_flags())
      EXPECT_NE(std::find_if(table->begin(), table->end(), [&](const FlagSpec& s) { return s.name == c.name; }),
                table->end())
          << c.name;
}

TEST(GuiFlags, ShareTheGenerationFlagsWithRender) {
  for (const auto* table : {&render_flags(), &gui_flags()})
    for (const FlagSpec& g : generation_flags()) {
      const auto it = std::find_if(table->begin(), table->end(), [&](const FlagSpec& s) { return s.name == g.name; });
      ASSERT_NE(it, table->end()) << g.name;
      EXPECT_EQ(it->help, g.help);
    }
}

}  // namespace
}  // namespace rtvd::cli
