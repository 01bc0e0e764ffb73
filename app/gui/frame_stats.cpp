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
  if (interval_ms < 0) return;
  push_capped(intervals_, interval_ms);
  interval_sum_ += interval_ms;
  ++intervals_counted_;
  recent_.emplace_back(now_s, interval_ms);
  while (recent_.size() > 1 && recent_.front().first < now_s - kRateWindowS) recent_.pop_front();
}

void FrameStats::add_gpu_ms(double ms) {
  push_capped(gpu_ms_, ms);
  gpu_sum_ += ms;
  ++gpu_counted_;
}

FrameRate FrameStats::recent() const {
  double sum = 0;
  for (const auto& [at, ms] : recent_) sum += ms;
  return rate(sum, int(recent_.size()));
}

FrameRate FrameStats::rate(double sum_ms, int n) {
  if (n == 0 || sum_ms <= 0) return {};
  return {n, sum_ms / n, 1e3 * n / sum_ms, sum_ms / 1e3};
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
