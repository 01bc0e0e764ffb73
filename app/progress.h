// Progress of a headless render on stderr. On a terminal: one line redrawn in place at most ~10 times a
// second, "[#####-----]  12/48 frames  8.3 fps  ETA 0:04". Otherwise (a log, CI): a plain line at every
// 10% of the frames (so every frame when there are few), or every 10 frames when the total is unknown.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace rtvd {

class Progress {
 public:
  // total_frames -1 = unknown. quiet prints nothing. out must outlive the reporter.
  Progress(int total_frames, bool quiet, std::FILE* out = stderr);
  void update(int frames_done);  // after each frame
  // Draws the final state of the terminal line and ends it, so the caller's summary starts on its own
  // line; prints nothing more.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::string line(int frames_done) const;

  std::FILE* out_;
  int total_;
  bool quiet_, tty_;
  Clock::time_point start_, last_draw_;
  int frames_done_ = 0;
  int last_step_ = 0;       // non-TTY: the last 10% step (or 10-frame block) printed
  bool drawn_ = false;      // TTY: a line is on screen, to end on finish()
};

}  // namespace rtvd
