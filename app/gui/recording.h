// Recording from the GUI without blocking the display loop: frames go through a bounded queue to a
// worker thread that writes them with the pipeline's recorder (the same one rtvd render uses). When the
// worker falls behind, frames are dropped and counted.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "app/gui/bounded_queue.h"
#include "pipeline/io/image.h"
#include "pipeline/io/recorder.h"

namespace rtvd::gui {

class Recording {
 public:
  static constexpr size_t kQueueFrames = 8;

  explicit Recording(std::unique_ptr<Recorder> recorder, size_t queue_frames = kQueueFrames);
  // Stops the worker. Unless finish() ran or a write failed (what was written is then kept where the
  // error says), the recorder removes what it wrote (pipeline/io/recorder.h).
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  void submit(const ImageRgba8& frame);  // a copy is queued, or dropped when the queue is full
  // Writes what is queued and finalises the file; throws the worker's RecordingFailed if a write failed.
  void finish();

  const std::string& path() const { return recorder_->path(); }
  int submitted() const { return submitted_; }
  int written() const { return written_; }
  int64_t dropped() const { return queue_.dropped(); }
  std::string error() const;  // the worker's write error (one line: file, cause, free space); "" while writing works

 private:
  void work();
  void stop_worker();

  std::unique_ptr<Recorder> recorder_;
  BoundedQueue<ImageRgba8> queue_;
  int submitted_ = 0;
  std::atomic<int> written_{0};
  mutable std::mutex error_mutex_;
  std::string error_;
  std::thread worker_;  // last: it starts in the constructor and uses every member above
};

}  // namespace rtvd::gui
