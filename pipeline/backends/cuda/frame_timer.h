// GPU timing of frames for the profiler, without stalling the loop. Every frame is timed as a whole by
// two events around its graph launch (outside the graph: nearly free). Per-op times come from a second
// capture of the frame with an event between every two ops; those event nodes cost about a microsecond
// each (at ~500 ops, half of a 2.5 ms frame), so that graph runs one frame in N, with N set from the
// measured cost so that per-op timing takes at most kMaxOverhead of the GPU's time. Events are read once
// their frame has completed, a frame or more later; nothing here waits.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace rtvd {

class FrameTimer {
 public:
  static constexpr double kMaxOverhead = 0.02;

  FrameTimer();
  ~FrameTimer();
  FrameTimer(const FrameTimer&) = delete;
  FrameTimer& operator=(const FrameTimer&) = delete;

  // Forgets every measurement and sizes the op events for a frame of `ops` ops (a new plan).
  void reset(size_t ops);

  // Event recorded before op i of an op-timed frame (i == ops: after the last op).
  cudaEvent_t op_event(size_t i) const { return op_events_.at(i); }

  // Whether the next frame should be the op-timed one (reads the frames that completed first).
  bool want_op_times();
  void frame_begin(cudaStream_t stream, bool op_timed);
  void frame_end(cudaStream_t stream);

  // Per-op ms of an op-timed frame that completed since the last call, or empty: each sample once.
  std::vector<float> take_op_ms();
  float last_frame_ms();  // GPU ms of the newest completed frame, 0 before one
  int interval() const { return interval_; }  // one op-timed frame in this many

 private:
  struct Slot {
    cudaEvent_t start = nullptr, end = nullptr;
    bool in_flight = false, op_timed = false;
  };
  void harvest();
  void read_slot(Slot& s);

  std::vector<cudaEvent_t> op_events_;
  Slot slots_[4];  // frames in flight, oldest first from next_
  int next_ = 0;
  bool op_frame_in_flight_ = false;
  int frames_since_op_timed_ = 1, interval_ = 2;
  double plain_ms_ = 0, op_timed_ms_ = 0;  // recent GPU times of plain and op-timed frames
  float last_frame_ms_ = 0;
  std::vector<float> op_ms_;
  bool op_ms_new_ = false;
};

}  // namespace rtvd
