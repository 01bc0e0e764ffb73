// How long this process has run, for times to a first output that count exec and dynamic loading too.
#pragma once

namespace rtvd {

// Seconds since this process started: the kernel's start time (/proc/self/stat field 22, clock ticks since
// boot) against CLOCK_BOOTTIME. 10 ms resolution.
double seconds_since_process_start();

}  // namespace rtvd
