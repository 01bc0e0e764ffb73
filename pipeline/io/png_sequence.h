// A recording as numbered PNG files: lossless frames, and what a build without FFmpeg's libraries records.
#pragma once
#include <memory>
#include <string>

#include "pipeline/io/recorder.h"

namespace rtvd {

// pattern: "dir/frame_%05d.png", one printf-style %d (zero padding and width allowed) in the file name;
// output: what the user asked for, named by the errors of the up-front checks.
std::unique_ptr<Recorder> open_png_sequence(const std::string& output, const std::string& pattern, int width,
                                            int height);

}  // namespace rtvd
