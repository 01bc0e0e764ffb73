// SIGINT, SIGTERM and SIGHUP as a request to stop: Ctrl-C, `timeout`, systemd, docker and a closed terminal
// all end a run the same way, with its recording finalised. The first of them requests cancellation
// (backends/cancel.h) and puts the three back to their default action, so a second one ends the process at once.
#pragma once

namespace rtvd {

class StopSignals {
 public:
  StopSignals();   // clears any earlier cancellation and installs the handler
  ~StopSignals();  // puts back the handlers there were before
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  static int received();  // the first signal's number since the constructor, 0 if none
};

const char* signal_name(int signo);  // "SIGINT", "SIGTERM" or "SIGHUP"; "a signal" for others

}  // namespace rtvd
