#include "app/gui/recording.h"

#include "base/error.h"

namespace rtvd::gui {

Recording::Recording(std::unique_ptr<Recorder> recorder, size_t queue_frames)
    : recorder_(std::move(recorder)), queue_(queue_frames), worker_([this] { work(); }) {}

Recording::~Recording() { stop_worker(); }

void Recording::submit(const ImageRgba8& frame) {
  ++submitted_;
  queue_.push(frame);
}

void Recording::finish() {
  stop_worker();
  if (const std::string e = error(); !e.empty()) throw RecordingFailed(e);
  recorder_->finish();
}

std::string Recording::error() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return error_;
}

// A failed write ends the worker: the queue is closed, so later frames are refused instead of piling up.
void Recording::work() {
  while (auto frame = queue_.pop()) {
    try {
      recorder_->write(*frame);
      ++written_;
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(error_mutex_);
        error_ = e.what();
      }
      queue_.close();
      return;
    }
  }
}

void Recording::stop_worker() {
  queue_.close();
  if (worker_.joinable()) worker_.join();
}

}  // namespace rtvd::gui
