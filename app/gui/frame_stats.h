// What the overlay and the exit line say about time: a history of frame times for the plot, the frame rate
// and frame time, run means, and a rolling per-op profile fed from the backend's timings.
#pragma once
#include <deque>
#include <utility>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/backends/profiler.h"

namespace rtvd::gui {

// Frames per second and milliseconds per frame from one set of frame intervals: frames_per_s = 1000 / ms.
struct FrameRate {
  int intervals = 0;     // how many were averaged (0: none yet)
  double ms = 0;         // their mean: from one generated frame to the next
  double frames_per_s = 0;
  double seconds = 0;    // the time they span
};

class FrameStats {
 public:
  static constexpr size_t kHistory = 240;  // frames in the plot
  static constexpr double kRateWindowS = 1.0;

  // A frame was generated at now_s (seconds on a steady clock). interval_ms: time since the previous
  // generated frame, or < 0 when there was none just before (the first frame, or after a pause): then
  // it counts as a frame but gives no interval.
  void add_frame(double now_s, double interval_ms);
  // The backend's time of a completed frame (GPU time on the GPU): Backend::frame_gpu_ms().
  void add_gpu_ms(double ms);

  const std::deque<float>& intervals() const { return intervals_; }  // oldest first
  const std::deque<float>& gpu_ms() const { return gpu_ms_; }
  // The overlay's: the intervals of the frames generated in the kRateWindowS seconds up to the newest
  // one, or the newest interval alone where that was longer.
  FrameRate recent() const;
  // The exit line's: every interval of the run.
  FrameRate run() const { return rate(interval_sum_, intervals_counted_); }
  int frames() const { return frames_; }
  double mean_gpu_ms() const { return gpu_counted_ ? gpu_sum_ / gpu_counted_ : 0; }

 private:
  static FrameRate rate(double sum_ms, int n);
  std::deque<float> intervals_, gpu_ms_;
  std::deque<std::pair<double, double>> recent_;  // (frame's time s, interval ms) of the rate's window
  int frames_ = 0, intervals_counted_ = 0, gpu_counted_ = 0;
  double interval_sum_ = 0, gpu_sum_ = 0;
};

// Per-op times over the last kWindow profiled frames: a FrameProfile that starts over every window and
// is shown once full, so the overlay follows the current settings rather than the run's average.
class RollingProfile {
 public:
  static constexpr int kWindow = 30;

  // Feeds the backend's frame_op_ms(): the per-op times of a frame it timed op by op (every frame on the
  // CPU, a sample on the GPU), each given once; empty when none completed since. False when nothing was
  // added.
  bool add(const std::vector<Op>& ops, const std::vector<float>& op_ms);
  // The last full window, or the one filling before the first is full.
  const FrameProfile& shown() const { return full_.frames() ? full_ : filling_; }
  double last_frame_ms() const { return last_frame_ms_; }
  void reset();  // the settings changed: times of the old plan no longer apply

 private:
  FrameProfile filling_, full_;
  double last_frame_ms_ = 0;
};

}  // namespace rtvd::gui
