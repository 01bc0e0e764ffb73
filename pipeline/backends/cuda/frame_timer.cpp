#include "pipeline/backends/cuda/frame_timer.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/cuda_context.cuh"

namespace rtvd {

FrameTimer::FrameTimer() {
  for (Slot& s : slots_) {
    RTVD_CUDA_CHECK(cudaEventCreate(&s.start));
    RTVD_CUDA_CHECK(cudaEventCreate(&s.end));
  }
}

FrameTimer::~FrameTimer() {
  for (Slot& s : slots_) cudaEventDestroy(s.start), cudaEventDestroy(s.end);
  for (cudaEvent_t e : op_events_) cudaEventDestroy(e);
}

void FrameTimer::reset(size_t ops) {
  for (Slot& s : slots_) s.in_flight = false;
  op_frame_in_flight_ = op_ms_new_ = false;
  // The first frame is op-timed and the next plain, so that both costs are known before adapting.
  frames_since_op_timed_ = 1;
  interval_ = 2;
  plain_ms_ = op_timed_ms_ = 0;
  last_frame_ms_ = 0;
  op_ms_.clear();
  if (op_events_.size() != ops + 1) {
    for (cudaEvent_t e : op_events_) cudaEventDestroy(e);
    op_events_.assign(ops + 1, nullptr);
    for (cudaEvent_t& e : op_events_) RTVD_CUDA_CHECK(cudaEventCreate(&e));
  }
}

void FrameTimer::read_slot(Slot& s) {
  s.in_flight = false;
  float ms = 0;
  RTVD_CUDA_CHECK(cudaEventElapsedTime(&ms, s.start, s.end));
  last_frame_ms_ = ms;
  if (!s.op_timed) {
    plain_ms_ = plain_ms_ > 0 ? 0.8 * plain_ms_ + 0.2 * ms : ms;
  } else {
    op_frame_in_flight_ = false;
    op_timed_ms_ = ms;
    op_ms_.resize(op_events_.size() - 1);
    for (size_t i = 0; i + 1 < op_events_.size(); ++i)
      RTVD_CUDA_CHECK(cudaEventElapsedTime(&op_ms_[i], op_events_[i], op_events_[i + 1]));
    op_ms_new_ = true;
  }
  // Sample op times as often as kMaxOverhead allows, given what the op events cost on this frame.
  if (plain_ms_ > 0 && op_timed_ms_ > 0) {
    const double cost = std::max(0.0, op_timed_ms_ - plain_ms_) / (kMaxOverhead * plain_ms_);
    interval_ = int(std::clamp(std::ceil(cost), 1.0, 1000.0));
  }
}

void FrameTimer::harvest() {
  for (int k = 0; k < 4; ++k) {
    Slot& s = slots_[(next_ + k) % 4];
    if (!s.in_flight) continue;
    const cudaError_t e = cudaEventQuery(s.end);
    if (e == cudaErrorNotReady) break;  // later frames can't have finished either
    RTVD_CUDA_CHECK(e);
    read_slot(s);
  }
}

bool FrameTimer::want_op_times() {
  harvest();
  return !op_frame_in_flight_ && frames_since_op_timed_ >= interval_ - 1;
}

void FrameTimer::frame_begin(cudaStream_t stream, bool op_timed) {
  harvest();
  Slot& s = slots_[next_];
  if (s.in_flight && s.op_timed) op_frame_in_flight_ = false;  // overtaken before it was read: dropped
  s.in_flight = true;
  s.op_timed = op_timed;
  if (op_timed) op_frame_in_flight_ = true, frames_since_op_timed_ = 0;
  else ++frames_since_op_timed_;
  RTVD_CUDA_CHECK(cudaEventRecord(s.start, stream));
}

void FrameTimer::frame_end(cudaStream_t stream) {
  RTVD_CUDA_CHECK(cudaEventRecord(slots_[next_].end, stream));
  next_ = (next_ + 1) % 4;
}

std::vector<float> FrameTimer::take_op_ms() {
  harvest();
  if (!op_ms_new_) return {};
  op_ms_new_ = false;
  return op_ms_;
}

float FrameTimer::last_frame_ms() {
  harvest();
  return last_frame_ms_;
}

}  // namespace rtvd
