#include "pipeline/graph/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "base/error.h"

namespace rtvd {

namespace {

// The first number in a file ("max" and unreadable files give nothing).
std::optional<int64_t> read_number(const char* path) {
  std::ifstream in(path);
  long long v = 0;
  if (!(in >> v) || v < 0) return std::nullopt;
  return int64_t(v);
}

// MemAvailable of /proc/meminfo, in bytes.
std::optional<int64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return int64_t(kib) * 1024;
  return std::nullopt;
}

// Room left under this process's cgroup limit (v2, else v1), when it has one.
std::optional<int64_t> cgroup_room() {
  for (const auto& [limit_path, usage_path] : {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
                                               std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                                         "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const auto limit = read_number(limit_path), usage = read_number(usage_path);
    // v1 writes "no limit" as a number near 2^63.
    if (limit && usage && *limit < (int64_t(1) << 62)) return std::max<int64_t>(0, *limit - *usage);
  }
  return std::nullopt;
}

}  // namespace

MemoryAvailable host_memory_available() {
  MemoryAvailable m;
  if (const auto available = mem_available()) {
    m = {*available, "host memory available (MemAvailable)"};
  } else {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    m = {pages > 0 && page > 0 ? int64_t(pages) * page : 0, "host memory free"};
  }
  if (const auto room = cgroup_room(); room && *room < m.bytes) m = {*room, "memory left under this cgroup's limit"};
  return m;
}

std::string byte_size(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t(1) << 40)) std::snprintf(text, sizeof text, "%.2f TiB", double(bytes) / double(int64_t(1) << 40));
  else if (bytes >= (int64_t(1) << 30)) std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(1 << 30));
  else std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1 << 20));
  return text;
}

void require_memory(std::string_view what, int64_t need, std::string_view detail, const MemoryAvailable& available) {
  if (need <= available.bytes) return;
  fail(what, " needs at least ", byte_size(need), detail.empty() ? "" : cat(" (", detail, ")"), ", but ",
       available.what, " is ", byte_size(available.bytes));
}

}  // namespace rtvd
