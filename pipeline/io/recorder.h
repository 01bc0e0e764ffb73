// Recorders write rendered frames: a video (MP4 or MKV through FFmpeg's libraries) or a PNG sequence.
//
// Nothing a recording writes replaces a good file until the recording is complete, and nothing written is
// lost when it cannot be completed:
// - a video is encoded into NAME.partial.EXT beside the output and renamed into place by finish(). MP4 is
//   fragmented and MKV written in clusters, each about a second long and flushed to the disk when it ends,
//   so a process killed outright or a power cut leaves NAME.partial.EXT playable up to its last second;
// - a write that fails (a full disk, a file-size limit, an I/O error) throws RecordingFailed: one line
//   naming the file, the cause and the free space, and where what was written plays from;
// - a recorder destroyed without finish() and without a failure (the run was abandoned before anything
//   worth keeping, or by its caller's choice) removes what it wrote.
#pragma once
#include <memory>
#include <string>

#include "base/error.h"
#include "pipeline/io/image.h"

namespace rtvd {

// A write or the finalisation failed: the recording is over and what it kept is where the message says.
struct RecordingFailed : Error {
  using Error::Error;
};

// Frame rates a recording accepts: a keyframe (and an MP4 fragment) comes every round(fps) frames, and
// muxers and players handle this range.
constexpr double kMinFps = 1.0, kMaxFps = 240.0;

class Recorder {
 public:
  virtual ~Recorder() = default;
  // frame's size must match the recorder's. Throws RecordingFailed when the frame cannot be written; every
  // later call throws it again.
  virtual void write(const ImageRgba8& frame) = 0;
  virtual void finish() = 0;                         // finalise (playable) and move into place
  virtual const std::string& path() const = 0;       // final path (file, or the PNG pattern)
  // Where a video is until finish() (NAME.partial.EXT); path() where frames go straight to their place.
  virtual const std::string& partial_path() const { return path(); }
  virtual int frames_written() const = 0;
  // "h264" (libx264); "mpeg4" when FFmpeg has no libx264; "png" for a PNG sequence.
  virtual const std::string& codec() const = 0;
  // What finish() did beside writing the frames, for the user ("removed 12 frames of an older sequence ..."),
  // or "".
  virtual const std::string& note() const {
    static const std::string kNone;
    return kNone;
  }
};

// "x.mp4" or "x.mkv" -> video (never "x.partial.mp4", a video's name until it is complete); "dir/" or an existing directory -> dir/frame_%05d.png; a path containing a
// printf-style %d (e.g. "f/%04d.png") -> PNG sequence. Checks up front that the output can be written
// (directory exists or can be created, not read-only) with a one-line Error.
std::unique_ptr<Recorder> open_recorder(const std::string& output, int width, int height, double fps);
// Whether open_recorder(output, ...) writes PNG frames (which have no frame rate) rather than a video.
bool is_png_output(const std::string& output);

bool video_recording_available();  // built with FFmpeg's libraries

}  // namespace rtvd
