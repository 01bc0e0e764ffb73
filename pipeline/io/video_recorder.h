// The video recorder (MP4, MKV) on FFmpeg's own libraries: libavcodec encodes (H.264 through libx264, else
// MPEG-4 part 2), libavformat muxes into a file written by FileSink, libswscale converts RGBA to YUV 4:2:0.
#pragma once
#include <memory>
#include <string>

#include "pipeline/io/recorder.h"

namespace rtvd {

// output ends in .mp4 or .mkv, width and height are even, fps is within [kMinFps, kMaxFps]
// (open_recorder checks these). In a build without FFmpeg's libraries, an Error.
std::unique_ptr<Recorder> open_video_recorder(const std::string& output, int width, int height, double fps);

}  // namespace rtvd
