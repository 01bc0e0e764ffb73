#include "pipeline/model_files/background_read_in.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace rtvd {
namespace {

// Steps between looks at the stop flag: a dropped file is let go within one step's read (~40 ms).
constexpr size_t kStepBytes = size_t(64) << 20;

// Maps [p, p + n) in. MADV_POPULATE_READ (Linux 5.14) does it as MAP_POPULATE does; before it, a read of
// each page. Any other error (the file cut short under us) stops here: the reader meets it as it would
// have without this thread.
bool populate(const uint8_t* p, size_t n, size_t page) {
  if (madvise(const_cast<uint8_t*>(p), n, MADV_POPULATE_READ) == 0) return true;
  if (errno != EINVAL) return false;
  for (size_t i = 0; i < n; i += page) (void)*static_cast<const volatile uint8_t*>(p + i);
  return true;
}

}  // namespace

BackgroundReadIn::BackgroundReadIn(const void* address, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(address);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  thread_ = std::thread([this, p, bytes, page] {
    for (size_t done = 0; done < bytes && !stop_.load(std::memory_order_relaxed); done += kStepBytes)
      if (!populate(p + done, std::min(kStepBytes, bytes - done), page)) return;
  });
}

BackgroundReadIn::~BackgroundReadIn() {
  stop_.store(true, std::memory_order_relaxed);
  thread_.join();
}

}  // namespace rtvd
