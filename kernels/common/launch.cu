#include "kernels/common/launch.cuh"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/quoted_text.h"

namespace rtvd {

bool pdl_setting(const char* value) {
  if (!value || std::strcmp(value, "1") == 0) return true;
  if (std::strcmp(value, "0") == 0) return false;
  fail("RTVD_PDL: expected 0 (programmatic dependent launch off) or 1 (on), got ", quote(value));
}

bool pdl_enabled() {
  static const bool enabled = pdl_setting(std::getenv("RTVD_PDL"));
  return enabled;
}

bool launches_programmatically(const void* kernel) {
  if (!pdl_enabled()) return false;
  static std::mutex mutex;
  static std::unordered_map<const void*, bool> known;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(kernel); it != known.end()) return it->second;
  cudaFuncAttributes attributes{};
  RTVD_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return known[kernel] = attributes.ptxVersion >= 90;
}

}  // namespace rtvd
