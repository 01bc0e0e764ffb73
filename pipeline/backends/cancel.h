// Cancellation of the work in progress, asked for by a signal handler or another thread (the GUI), and
// honoured between ops: a frame being computed stops within one op, not at its end.
#pragma once
#include "base/error.h"

namespace rtvd {

// Thrown out of Engine::step() (and the backends' run_frame) when cancellation was requested mid-frame.
// The caller keeps what earlier frames produced: the render loop finalises its recording.
struct Cancelled : Error {
  using Error::Error;
};

void request_cancel() noexcept;    // async-signal-safe: sets one lock-free atomic
bool cancel_requested() noexcept;  // relaxed read, cheap enough between any two ops
void clear_cancel() noexcept;
void throw_if_cancelled();         // throws Cancelled when requested

}  // namespace rtvd
