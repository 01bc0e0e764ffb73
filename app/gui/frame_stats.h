// What the overlay and the exit line say about time: a history of frame times for the plot, frames per
// second, run means, and a rolling per-op profile fed from the backend's timings.
#pragma once
#include <deque>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/backends/profiler.h"

namespace rtvd::gui {

class FrameStats {
 public:
  static constexpr size_t kHistory = 240;  // frames in the plot

  // A frame was generated at now_s (seconds on a steady clock). interval_ms: time since the previous
  // generated frame, or < 0 when there was none just before (the first frame, or after a pause), which
  // then counts for the frame rate but not for the interval history.
  void add_frame(double now_s, double interval_ms);
  // The backend's time of a completed frame (GPU time on the GPU): Backend::frame_gpu_ms().
  void add_gpu_ms(double ms);

  const std::deque<float>& intervals() const { return intervals_; }  // oldest first
  const std::deque<float>& gpu_ms() const { return gpu_ms_; }
  double fps(double now_s) const;  // generated frames in the last second
  double recent_interval_ms() const;  // mean of intervals()
  int frames() const { return frames_; }
  double mean_interval_ms() const { return intervals_counted_ ? interval_sum_ / intervals_counted_ : 0; }
  double mean_gpu_ms() const { return gpu_counted_ ? gpu_sum_ / gpu_counted_ : 0; }

 private:
  std::deque<float> intervals_, gpu_ms_;
  std::deque<double> recent_;  // times of the frames of the last second
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
