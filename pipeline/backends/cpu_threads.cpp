#include "pipeline/backends/cpu_threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace rtvd {

namespace {

// Between two measurements: /proc/stat counts in 10 ms ticks, so a quarter second resolves 4% of a CPU,
// and a change of load is followed within a frame or two.
constexpr auto kInterval = std::chrono::milliseconds(250);

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The number at the start of s (after spaces), advancing s past it; false if there is none.
bool take_int(std::string_view& s, int64_t& value) {
  const size_t start = s.find_first_not_of(' ');
  if (start == std::string_view::npos) return false;
  s.remove_prefix(start);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc()) return false;
  s.remove_prefix(size_t(end - s.data()));
  return true;
}

// The cgroup limit of this process in CPUs, 0 if none: v2's cpu.max, else v1's cfs quota and period.
int cgroup_cpu_limit() {
  std::istringstream lines(read_text("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    // "ID:CONTROLLERS:PATH"; v2 is "0::PATH".
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      if (const int cpus = parse_cpu_max(read_text("/sys/fs/cgroup" + path + "/cpu.max"))) return cpus;
      continue;
    }
    if (("," + controllers + ",").find(",cpu,") == std::string::npos) continue;
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      std::string quota = read_text(std::string(mount) + path + "/cpu.cfs_quota_us");
      const std::string period = read_text(std::string(mount) + path + "/cpu.cfs_period_us");
      if (quota.empty() || period.empty()) continue;
      quota.erase(quota.find_last_not_of(" \n") + 1);
      if (quota == "-1") return 0;
      return parse_cpu_max(quota + " " + period);
    }
  }
  return 0;
}

}  // namespace

int threads_for_load(int cpus, double others) {
  const int busy = int(std::ceil(std::max(others, 0.0) - 0.25));
  return std::clamp(cpus - busy, 1, std::max(cpus, 1));
}

int64_t busy_ticks(std::string_view text, const std::vector<bool>& in_set) {
  int64_t busy = -1;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice"; guest time is already in
    // user and nice, idle and iowait are not busy.
    if (line.substr(0, 3) != "cpu" || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    line.remove_prefix(3);
    int64_t id = 0, field[8] = {};
    if (!take_int(line, id) || id < 0 || size_t(id) >= in_set.size() || !in_set[size_t(id)]) continue;
    bool ok = true;
    for (int64_t& f : field) ok = ok && take_int(line, f);
    if (!ok) continue;
    busy = std::max<int64_t>(busy, 0) + field[0] + field[1] + field[2] + field[5] + field[6] + field[7];
  }
  return busy;
}

int parse_cpu_max(std::string_view text) {
  int64_t quota = 0, period = 0;
  if (!take_int(text, quota) || !take_int(text, period) || quota <= 0 || period <= 0) return 0;
  return int(std::min<int64_t>((quota + period - 1) / period, 1 << 20));
}

CpuThreads::CpuThreads(int requested) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int affinity = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    affinity = CPU_COUNT(&set);
    in_set_.resize(CPU_SETSIZE);
    for (int i = 0; i < CPU_SETSIZE; ++i) in_set_[size_t(i)] = CPU_ISSET(i, &set);
  }
  if (affinity == 0) affinity = int(std::max(1u, std::thread::hardware_concurrency()));
  most_ = affinity;
  if (const int limit = cgroup_cpu_limit(); limit > 0) most_ = std::min(most_, limit);

  if (requested > 0) {
    most_ = current_ = requested;
    return;
  }
  last_ = sample();
  adaptive_ = most_ > 1 && last_.busy_ticks >= 0;
  // Until the first measurement, one thread: the most a busy machine gives without harm.
  current_ = adaptive_ ? 1 : most_;
}

CpuThreads::Sample CpuThreads::sample() const {
  Sample s;
  s.when = std::chrono::steady_clock::now();
  timespec own{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &own);
  s.own_seconds = double(own.tv_sec) + own.tv_nsec * 1e-9;
  s.busy_ticks = busy_ticks(read_text("/proc/stat"), in_set_);
  return s;
}

int CpuThreads::for_frame() {
  if (!adaptive_ || std::chrono::steady_clock::now() - last_.when < kInterval) return current_;
  const Sample now = sample();
  const double wall = std::chrono::duration<double>(now.when - last_.when).count();
  if (now.busy_ticks >= last_.busy_ticks && wall > 0) {
    const double busy = double(now.busy_ticks - last_.busy_ticks) / double(sysconf(_SC_CLK_TCK));
    const double others = (busy - (now.own_seconds - last_.own_seconds)) / wall;
    const int fits = threads_for_load(most_, others);
    // Fewer at once; more only when two measurements in a row agree, since a thread too many costs far
    // more than one too few (a gap between a busy neighbour's jobs is no reason to take its core).
    raise_votes_ = fits > current_ ? raise_votes_ + 1 : 0;
    if (fits < current_ || raise_votes_ >= 2) {
      current_ = fits;
      raise_votes_ = 0;
    }
  }
  last_ = now;
  return current_;
}

}  // namespace rtvd
