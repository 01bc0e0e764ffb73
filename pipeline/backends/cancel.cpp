#include "pipeline/backends/cancel.h"

#include <atomic>

namespace rtvd {

namespace {

std::atomic<bool> g_cancel{false};
static_assert(std::atomic<bool>::is_always_lock_free, "request_cancel() must be async-signal-safe");

}  // namespace

void request_cancel() noexcept { g_cancel.store(true, std::memory_order_relaxed); }
bool cancel_requested() noexcept { return g_cancel.load(std::memory_order_relaxed); }
void clear_cancel() noexcept { g_cancel.store(false, std::memory_order_relaxed); }

void throw_if_cancelled() {
  if (cancel_requested()) throw Cancelled("cancelled");
}

}  // namespace rtvd
