#include "app/common/stop_signals.h"

#include <signal.h>

#include <atomic>
#include <iterator>

#include "pipeline/backends/cancel.h"

namespace rtvd {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler's atomic must be async-signal-safe");
struct sigaction g_previous[std::size(kStopSignals)];

void set_default(int signo) {
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signo, &fallback, nullptr);
}

// Async-signal-safe: lock-free atomics, sigaction and raise. The stop signals are blocked in the thread
// while it runs (sa_mask), so one that arrives meanwhile waits for it and then meets the default action.
// Another thread may take a second signal before the first handler has put the defaults back: that
// handler raises its signal again, which the default action ends the process with when the handler returns.
void on_stop_signal(int signo) {
  int none = 0;
  if (!g_received.compare_exchange_strong(none, signo)) {
    set_default(signo);
    raise(signo);
    return;
  }
  request_cancel();
  for (int s : kStopSignals) set_default(s);
}

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  clear_cancel();
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;  // reads and writes in progress go on: the run stops where it checks
  sigemptyset(&action.sa_mask);
  for (int s : kStopSignals) sigaddset(&action.sa_mask, s);
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    sigaction(kStopSignals[i], &action, &g_previous[i]);
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    sigaction(kStopSignals[i], &g_previous[i], nullptr);
}

int StopSignals::received() { return g_received; }

const char* signal_name(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

}  // namespace rtvd
