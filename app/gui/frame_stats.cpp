#include "app/gui/frame_stats.h"

#include <numeric>

namespace rtvd::gui {

namespace {

void push_capped(std::deque<float>& history, double v) {
  history.push_back(float(v));
  if (history.size() > FrameStats::kHistory) history.pop_front();
}

}  // namespace

void FrameStats::add_frame(double now_s, double interval_ms) {
  ++frames_;
  recent_.push_back(now_s);
  while (!recent_.empty() && recent_.front() <= now_s - 1.0) recent_.pop_front();
  if (interval_ms < 0) return;
  push_capped(intervals_, interval_ms);
  interval_sum_ += interval_ms;
  ++intervals_counted_;
}

void FrameStats::add_gpu_ms(double ms) {
  push_capped(gpu_ms_, ms);
  gpu_sum_ += ms;
  ++gpu_counted_;
}

double FrameStats::fps(double now_s) const {
  size_t n = 0;
  for (double t : recent_) n += t > now_s - 1.0;
  return double(n);
}

double FrameStats::recent_interval_ms() const {
  if (intervals_.empty()) return 0;
  return std::accumulate(intervals_.begin(), intervals_.end(), 0.0) / double(intervals_.size());
}

bool RollingProfile::add(const std::vector<Op>& ops, const std::vector<float>& op_ms) {
  if (op_ms.empty() || op_ms.size() != ops.size()) return false;
  last_frame_ms_ = std::accumulate(op_ms.begin(), op_ms.end(), 0.0);
  filling_.add_frame(ops, op_ms);
  if (filling_.frames() >= kWindow) {
    full_ = filling_;
    filling_ = FrameProfile();
  }
  return true;
}

void RollingProfile::reset() { *this = RollingProfile(); }

}  // namespace rtvd::gui
