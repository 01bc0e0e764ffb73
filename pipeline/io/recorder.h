// Recorders write rendered frames: MP4 (H.264 through OpenCV's VideoWriter) or a PNG sequence.
// Output goes to a temporary name and is renamed into place by finish(); a recorder destroyed without
// finish() removes what it wrote, so a failed run never leaves a half-written file behind.
#pragma once
#include <memory>
#include <string>

#include "pipeline/io/image.h"

namespace rtvd {

class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual void write(const ImageRgba8& frame) = 0;  // frame size must match the recorder's
  virtual void finish() = 0;                        // finalise (playable) and move into place
  virtual const std::string& path() const = 0;      // final path (file, or the PNG pattern)
  virtual int frames_written() const = 0;
  // "h264"; "mpeg4" when OpenCV's backend has no H.264 encoder; "png" for a PNG sequence.
  virtual const std::string& codec() const = 0;
};

// "x.mp4" (also .mkv/.avi) -> video; "dir/" or an existing directory -> dir/frame_%05d.png;
// a path containing a printf-style %d (e.g. "f/%04d.png") -> PNG sequence. Checks up front that the
// output can be written (directory exists or can be created, not read-only) with a one-line Error.
std::unique_ptr<Recorder> open_recorder(const std::string& output, int width, int height, double fps);

bool video_recording_available();  // built with OpenCV

}  // namespace rtvd
