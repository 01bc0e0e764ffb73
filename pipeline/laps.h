// Named parts of a stretch of time, each from the end of the one before: how the engine's making and
// `rtvd render`'s start to the first frame account for their time ("source 0.00, model files 0.09, ..."), and
// `rtvd bench unet`'s from process start to the first output.
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace rtvd {

class Laps {
 public:
  // The part since the previous lap (or since this object was made) ends now.
  void lap(std::string what) {
    const auto now = std::chrono::steady_clock::now();
    parts_.emplace_back(std::move(what), std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }
  // A part timed before this clock began or by another one, after the parts so far; the next lap still
  // starts where the previous one ended.
  void add(std::pair<std::string, double> part) { parts_.push_back(std::move(part)); }
  // A later stretch's parts, as this one's own; the next lap starts where that one's last ended.
  void append(const Laps& later) {
    parts_.insert(parts_.end(), later.parts_.begin(), later.parts_.end());
    last_ = later.last_;
  }
  const std::vector<std::pair<std::string, double>>& parts() const { return parts_; }  // (what, seconds)

 private:
  std::vector<std::pair<std::string, double>> parts_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace rtvd
