// open_recorder: which recorder an output name asks for, and the checks every recorder shares.
#include "pipeline/io/recorder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "build_config.h"
#include "pipeline/io/png_sequence.h"
#include "pipeline/io/video_recorder.h"

namespace rtvd {

namespace {

namespace fs = std::filesystem;

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

}  // namespace

// The choices open_recorder makes first: a folder or a %d pattern.
bool is_png_output(const std::string& output) {
  std::error_code ec;
  return output.ends_with('/') || fs::is_directory(output, ec) || output.find('%') != std::string::npos;
}

std::unique_ptr<Recorder> open_recorder(const std::string& output, int width, int height, double fps) {
  if (output.empty()) fail("output path is empty");
  if (width <= 0 || height <= 0) fail(output, ": frame size must be positive, got ", width, "x", height);
  if (!(fps >= kMinFps && fps <= kMaxFps))
    fail(output, ": frame rate must be from ", kMinFps, " to ", kMaxFps, " frames/s, got ", fps);

  std::error_code ec;
  if (output.ends_with('/') || fs::is_directory(output, ec))
    return open_png_sequence(output, (output.ends_with('/') ? output : output + "/") + "frame_%05d.png", width, height);
  if (output.find('%') != std::string::npos) return open_png_sequence(output, output, width, height);

  const std::string ext = lower_extension(output);
  // AVI keeps its index at the end of the file: a recording cut short by a kill or a full disk is not one
  // that plays, so rtvd does not write it.
  if (ext == ".avi") fail(output, ": AVI cannot be written safely (its index comes last); use .mkv or .mp4");
  if (ext != ".mp4" && ext != ".mkv")
    fail(output, ": expected a .mp4/.mkv file, a directory ending in '/', or a %d .png pattern");
  // The name a video of NAME.EXT has until it is complete: one written there would block every later NAME.EXT.
  if (lower_extension(fs::path(output).stem().string()) == ".partial") {
    const std::string given = fs::path(output).extension().string();
    fail(output, ": NAME.partial", given, " is where rtvd keeps the video NAME", given,
         " until it is complete: choose a name without .partial");
  }
  if (!video_recording_available())
    fail(output, ": rtvd was built without FFmpeg's libraries, so it records PNG frames only (e.g. -o out/frames/)");
  // H.264 in 4:2:0 halves chroma both ways: an odd size would be cropped by a pixel.
  if (width % 2 != 0 || height % 2 != 0)
    fail(output, ": video needs an even width and height, got ", width, "x", height, " (or record PNG frames)");
  return open_video_recorder(output, width, height, fps);
}

bool video_recording_available() { return RTVD_HAS_LIBAV; }

}  // namespace rtvd
