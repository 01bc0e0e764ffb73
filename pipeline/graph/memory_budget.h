// Memory asked of the machine, compared with what it has before anything is built or allocated: a model or
// frame size that cannot fit is refused with both numbers, instead of an allocation that the kernel grants
// and the OOM killer collects later (Linux overcommits).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace rtvd {

struct MemoryAvailable {
  int64_t bytes = 0;
  std::string what;  // where it was read, for messages: "host memory available (MemAvailable)"
};

// What this process could still allocate on the host: MemAvailable from /proc/meminfo (free memory plus
// what the kernel can reclaim), lowered to the cgroup's limit where one is set, as in a container.
MemoryAvailable host_memory_available();

// "12.0 MiB", "1.50 GiB", "12.32 TiB".
std::string byte_size(int64_t bytes);

// Error unless need fits: "<what> needs at least <need> (<detail>, if any), but <available.what> is <bytes>".
void require_memory(std::string_view what, int64_t need, std::string_view detail, const MemoryAvailable& available);

}  // namespace rtvd
