// How many OpenMP threads the CPU backend runs a frame with. --threads N fixes N. --threads 0 (the
// default) takes the CPUs this process may use (its affinity mask, capped by a cgroup CPU quota) less
// those that other processes keep busy, measured from /proc/stat between frames: a frame's parallel
// regions end at barriers, so a thread that shares its core with another process holds all the others
// back, and on 2 cores with one busy, 2 threads ran slower than 1 (docs/perf-notes.md). The ops cut their
// work by shape, never by thread count, so the frames are the same bits whatever this chooses.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rtvd {

// Threads for `cpus` usable CPUs when other processes keep `others` CPUs' worth of them busy: a CPU
// counts while at least 3/4 of it is free. Never fewer than 1.
int threads_for_load(int cpus, double others);

// Clock ticks spent busy (all but idle and iowait) on the CPUs whose in_set[id] is true, from /proc/stat's
// text; -1 if it has none of their lines.
int64_t busy_ticks(std::string_view proc_stat, const std::vector<bool>& in_set);

// A cgroup CPU limit in CPUs (rounded up), from cgroup v2's cpu.max text ("max 100000" or
// "QUOTA PERIOD"), or 0 when unlimited or unreadable.
int parse_cpu_max(std::string_view text);

class CpuThreads {
 public:
  explicit CpuThreads(int requested);  // requested > 0: always that many; 0: chosen by load

  // Threads for the next frame, re-measured a quarter second after the last measurement: fewer as soon as
  // other processes take CPUs, more once two measurements in a row find them free.
  int for_frame();
  int most() const { return most_; }
  bool adaptive() const { return adaptive_; }

 private:
  struct Sample {
    std::chrono::steady_clock::time_point when;
    double own_seconds = 0;  // this process's CPU time
    int64_t busy_ticks = -1;  // of the CPUs in in_set_
  };
  Sample sample() const;

  bool adaptive_ = false;
  int most_ = 1, current_ = 1;
  int raise_votes_ = 0;  // measurements in a row that found room for more than current_
  std::vector<bool> in_set_;  // by CPU id: in this process's affinity mask
  Sample last_;
};

}  // namespace rtvd
