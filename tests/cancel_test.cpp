// Cancellation of CPU work (pipeline/backends/cancel.h, kernels/common/cpu_cancel.h): a request from
// another thread stops a long kernel within one piece of its work and a running frame within a second,
// and a cancelled frame leaves the engine able to render that frame again exactly as an engine that was
// never cancelled does.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/common/cpu_cancel.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/linear/linear.h"
#include "pipeline/backends/cancel.h"
#include "pipeline/engine.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using Clock = std::chrono::steady_clock;

// The bound: Ctrl-C reaches a running frame within a second. A kernel polls every few ms of work
// on one idle core, so this leaves a wide margin for a loaded machine.
constexpr auto kLatencyBound = std::chrono::seconds(1);

// Calls request_cancel() from its own thread, `after` once `started` is set (or at once if null), and
// remembers when.
class DelayedCancel {
 public:
  DelayedCancel(std::chrono::milliseconds after, const std::atomic<bool>* started = nullptr)
      : thread_([this, after, started] {
          while (started && !started->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::this_thread::sleep_for(after);
          requested_at_ = Clock::now();
          request_cancel();
        }) {}
  ~DelayedCancel() {
    if (thread_.joinable()) thread_.join();
  }
  Clock::time_point requested_at() {
    if (thread_.joinable()) thread_.join();
    return requested_at_;
  }

 private:
  Clock::time_point requested_at_;
  std::thread thread_;
};

class Cancel : public testing::Test {
 protected:
  void SetUp() override { clear_cancel(); }
  void TearDown() override { clear_cancel(); }
};

// Large inputs whose values do not matter to how long the GEMMs take: a cheap deterministic pattern in
// [-0.5, 0.5), not random, since drawing hundreds of MB of normals would take longer than the test.
std::vector<float> pattern(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((i * 2654435761u + seed) % 1021) / 1021.0f - 0.5f;
  return v;
}

// The CPU backend's poll (cancel_requested), noting that the kernel has started polling.
std::atomic<bool> g_polled{false};
bool poll_cancel_requested() noexcept {
  g_polled.store(true);
  return cancel_requested();
}

// Runs a kernel of a few hundred ms under a CancelScope, with a request 50 ms after its first poll: it
// must return within the bound of the request, having skipped work.
void expect_stops_within_bound(const std::function<void()>& kernel) {
  g_polled.store(false);
  const cpu::CancelScope scope(&poll_cancel_requested);
  DelayedCancel cancel(std::chrono::milliseconds(50), &g_polled);
  const auto start = Clock::now();
  kernel();
  const auto end = Clock::now();
  g_polled.store(true);  // a kernel that never polled: let the request go out all the same
  const auto requested = cancel.requested_at();
  ASSERT_TRUE(scope.stopped()) << "the kernel finished in " << std::chrono::duration<double>(end - start).count()
                               << " s without stopping: make it longer";
  EXPECT_LT(end - requested, kLatencyBound)
      << "returned " << std::chrono::duration<double>(end - requested).count() << " s after the request";
}

TEST_F(Cancel, LongConvStopsWithinOnePiece) {
  // 3x3, 384 -> 384 channels at 128x128: 16384 x 3456 x 384 x 2 = 43 GFLOP, in 28 im2col chunks.
  Conv2dParams p;
  p.n = 1, p.h = p.w = 128, p.c_in = 384, p.c_out = 384, p.kh = p.kw = 3, p.pad = 1;
  p.h_out = p.w_out = 128;
  const size_t pixels = size_t(p.n) * p.h * p.w;
  const std::vector<float> x = pattern(pixels * p.c_in, 1), weight = pattern(size_t(p.c_out) * 9 * p.c_in, 2);
  std::vector<float> y(pixels * p.c_out);
  std::vector<uint8_t> workspace(conv2d_cpu_workspace_bytes(p));
  p.x = x.data(), p.weight = weight.data(), p.y = y.data();
  p.workspace = workspace.data(), p.workspace_bytes = workspace.size();
  expect_stops_within_bound([&] { conv2d_cpu(p); });
}

TEST_F(Cancel, LongLinearStopsWithinOnePiece) {
  // 16384 x 1024 x 1024 x 2 = 34 GFLOP, in 64 pieces of 256 rows.
  LinearParams p;
  p.m = 16384, p.n = 1024, p.k = 1024;
  const std::vector<float> x = pattern(size_t(p.m) * p.k, 3), w = pattern(size_t(p.n) * p.k, 4);
  std::vector<float> y(size_t(p.m) * p.n);
  p.x = x.data(), p.w = w.data(), p.y = y.data();
  expect_stops_within_bound([&] { linear_cpu(p); });
}

TEST_F(Cancel, LongAttentionStopsWithinOneBlock) {
  // Self-attention of 8192 tokens, one head of 96 for each of two images: 2 x 2 x 8192^2 x 96 x 2 =
  // 52 GFLOP (the default model's mid-block at 512x512 has 16384 tokens).
  AttentionParams p;
  p.batch = 2, p.heads = 1, p.head_dim = 96, p.q_len = p.kv_len = 8192;
  p.q_stride = p.k_stride = p.v_stride = p.o_stride = p.head_dim;
  p.scale = 0.1f;
  const size_t elems = size_t(p.batch) * p.q_len * p.head_dim;
  const std::vector<float> q = pattern(elems, 5), k = pattern(elems, 6), v = pattern(elems, 7);
  std::vector<float> o(elems);
  std::vector<uint8_t> workspace(attention_cpu_workspace_bytes(p));
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data();
  p.workspace = workspace.data(), p.workspace_bytes = workspace.size();
  expect_stops_within_bound([&] { attention_cpu(p); });
}

TEST_F(Cancel, NoScopeNoStop) {
  // Outside a CancelScope (setup, tests, benchmarks) a pending request stops nothing.
  request_cancel();
  EXPECT_FALSE(cpu::cancelled());
  LinearParams p;
  p.m = 1024, p.n = 64, p.k = 64;
  const std::vector<float> x = pattern(size_t(p.m) * p.k, 8), w = pattern(size_t(p.n) * p.k, 9);
  std::vector<float> y(size_t(p.m) * p.n, test::kPoison);
  p.x = x.data(), p.w = w.data(), p.y = y.data();
  linear_cpu(p);
  EXPECT_TRUE(test::all_finite(y)) << "every output written";
}

TEST_F(Cancel, RequestBeforeAFrameStopsItAtOnce) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  Engine engine(o);
  request_cancel();
  EXPECT_THROW(engine.step(nullptr), Cancelled);
  EXPECT_EQ(engine.frame_index(), 0);
  clear_cancel();
  engine.step(nullptr);
  EXPECT_EQ(engine.frame_index(), 1);
}

TEST_F(Cancel, RunningFrameThrowsWithinASecondAndTheEngineRendersOn) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  EngineOptions o;
  o.device = DeviceKind::Cpu;  // the model's 64x64: ~0.1 s a frame of 2 steps on 2 idle cores
  FrameSettings s;
  s.seed = rng.gen();
  s.steps = 2;

  Engine engine(o);
  engine.configure(s, false);
  engine.step(nullptr);  // frame 0: the frame cancelled next has a blend history to keep intact

  // Frames from 1 on until the request, 300 ms in, stops one: on a machine fast enough to finish frames
  // sooner, the one running when it arrives.
  std::optional<Clock::time_point> thrown;
  {
    DelayedCancel cancel(std::chrono::milliseconds(300));
    for (int i = 0; i < 100 && !thrown; ++i) {
      try {
        engine.step(nullptr);
      } catch (const Cancelled&) {
        thrown = Clock::now();
      }
    }
    ASSERT_TRUE(thrown) << "100 frames ran without seeing the request";
    const auto late = *thrown - cancel.requested_at();
    EXPECT_LT(late, kLatencyBound) << "threw " << std::chrono::duration<double>(late).count()
                                   << " s after the request";
  }
  const int64_t cancelled_frame = engine.frame_index();
  EXPECT_THROW(engine.step(nullptr), Cancelled) << "until cleared, every step is cancelled";
  EXPECT_EQ(engine.frame_index(), cancelled_frame) << "a cancelled step does not count";

  clear_cancel();
  const ImageRgba8 again = engine.render(nullptr);
  Engine reference(o);
  reference.configure(s, false);
  for (int64_t i = 0; i < cancelled_frame; ++i) reference.step(nullptr);
  const ImageRgba8& expected = reference.render(nullptr);
  // It blends with the frame before, so the cancelled attempt left the blend history as it was too.
  EXPECT_EQ(again.pixels, expected.pixels) << "frame " << cancelled_frame << " rendered after the cancelled one";
}

}  // namespace
}  // namespace rtvd
