// Cancellation inside the CPU kernels. One conv, linear or attention call can run for seconds (attention
// at 512x512: ~20 s), so between ops is too coarse. kernels/ cannot see pipeline/'s cancel flag
// (docs/architecture.md), so whoever runs the ops installs a poll for as long as stopping is allowed:
// the CPU backend, around a frame (pipeline/backends/cancel.h's cancel_requested). The long kernels ask
// cancelled() between pieces of work of a few milliseconds and, once it says yes, skip the rest: their
// output is then incomplete, and CancelScope::stopped() tells the caller to discard it. Nothing here
// throws, since it is asked inside OpenMP regions, where a thread may skip work but must still reach
// every barrier.
#pragma once
#include <atomic>
#include <cstdint>

namespace rtvd::cpu {

using CancelPoll = bool (*)() noexcept;

namespace detail {
inline std::atomic<CancelPoll> cancel_poll{nullptr};
inline std::atomic<bool> cancel_seen{false};  // a kernel saw the poll say yes: some output is incomplete
}  // namespace detail

// Whether to stop: the installed poll said so, now or earlier in this scope (latched, so that a cleared
// flag cannot let a later piece of an abandoned op run on incomplete inputs). Any thread, any time.
inline bool cancelled() noexcept {
  if (detail::cancel_seen.load(std::memory_order_relaxed)) return true;
  const CancelPoll poll = detail::cancel_poll.load(std::memory_order_relaxed);
  if (!poll || !poll()) return false;
  detail::cancel_seen.store(true, std::memory_order_relaxed);
  return true;
}

// Installs poll while alive. One scope at a time per process: the CPU backend runs one frame at a time
// (its OpenMP threads are per process too).
class CancelScope {
 public:
  explicit CancelScope(CancelPoll poll) noexcept {
    detail::cancel_seen.store(false);
    detail::cancel_poll.store(poll);
  }
  ~CancelScope() {
    detail::cancel_poll.store(nullptr);
    detail::cancel_seen.store(false);
  }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

  // Whether a kernel skipped work since the scope began. Read after the op returns (its parallel
  // region's end orders the kernels' stores before this load).
  bool stopped() const noexcept { return detail::cancel_seen.load(); }
};

// For a loop inside a parallel region whose iterations meet at barriers: whether to leave it at iteration
// i, one answer for all threads (a thread that left alone would leave the others waiting at a barrier).
// One thread asks cancelled() for all and the single's barrier publishes the answer, so every thread
// must call it at every iteration, and it is a barrier too. The answer alternates between two slots: a
// thread released from iteration i's barrier may still be reading it while a faster one writes i + 1's.
// Share one LoopStop (declare it before the region).
class LoopStop {
 public:
  bool operator()(int64_t i) {
#pragma omp single
    stop_[i & 1] = cancelled();
    return stop_[i & 1];
  }

 private:
  bool stop_[2] = {false, false};
};

}  // namespace rtvd::cpu
