#include "app/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace rtvd {

namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
constexpr int kBarWidth = 10;
constexpr int kUnknownTotalStep = 10;  // frames between plain lines when the total is unknown

std::string clock_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

Progress::Progress(int total_frames, bool quiet, std::FILE* out)
    : out_(out),
      total_(total_frames > 0 ? total_frames : -1),
      quiet_(quiet),
      tty_(::isatty(::fileno(out)) != 0),
      start_(Clock::now()),
      last_draw_(start_) {}

std::string Progress::line(int frames_done) const {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  const double fps = seconds > 0 ? frames_done / seconds : 0.0;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f fps", fps);
  if (total_ < 0) return cat(frames_done, " frames  ", rate);

  const int filled = int(int64_t(kBarWidth) * std::min(frames_done, total_) / total_);
  const std::string bar = cat("[", std::string(filled, '#'), std::string(kBarWidth - filled, '-'), "]");
  const std::string done = std::to_string(frames_done), total = std::to_string(total_);
  const std::string eta = fps > 0 ? clock_text((total_ - frames_done) / fps) : "?";
  return cat(bar, "  ", std::string(total.size() - std::min(total.size(), done.size()), ' '), done, "/", total,
             " frames  ", rate, "  ETA ", eta);
}

void Progress::update(int frames_done) {
  frames_done_ = frames_done;
  if (quiet_) return;
  if (tty_) {
    const Clock::time_point now = Clock::now();
    if (drawn_ && now - last_draw_ < kRedrawInterval && frames_done != total_) return;
    last_draw_ = now;
    drawn_ = true;
    std::fprintf(out_, "\r%s\033[K", line(frames_done).c_str());  // \033[K clears what a longer line left
    std::fflush(out_);
    return;
  }
  const int step = total_ > 0 ? int(int64_t(frames_done) * 10 / total_) : frames_done / kUnknownTotalStep;
  if (step <= last_step_) return;
  last_step_ = step;
  std::fprintf(out_, "%s\n", line(frames_done).c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (quiet_ || !tty_ || !drawn_) return;
  std::fprintf(out_, "\r%s\033[K\n", line(frames_done_).c_str());
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace rtvd
