// Frame sources: where each frame starts. The noise walk needs no image (the engine draws the noise
// itself); image, video and webcam sources give an RGB image per frame for img2img at a strength.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rtvd {

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  virtual std::string describe() const = 0;  // "noise walk", "video clip.mp4 (640x360, 120 frames, 30 fps)"
  virtual bool has_images() const = 0;       // false for the noise walk
  // The next frame cropped around its centre to the aspect ratio of (width, height) (image_ops.h's
  // center_crop: never stretched) and resized to (width, height), as RGB floats in [-1, 1],
  // (height, width, 3) row-major.
  // Returns false at the end of the stream (a video's last frame); a read error throws Error.
  virtual bool next(int width, int height, std::vector<float>& rgb) = 0;
  // The same frame as 8-bit RGB, each value the float one's byte rounded (resize_to_rgb8; the same bytes b
  // as b / 127.5 - 1 where the source has the frame's size): what the engine sends the device
  // (Engine::step's 8-bit overload), a quarter of the floats' bytes.
  virtual bool next(int width, int height, std::vector<uint8_t>& rgb) = 0;
  virtual int frame_count() const { return -1; }  // known length (video files), -1 unknown/endless
  // The frames' own size, before next() fits them to the frame; 0 for the noise walk.
  virtual int width() const { return 0; }
  virtual int height() const { return 0; }
  virtual void rewind() {}                         // restart a video from its first frame
  // Frames per second of a video file or webcam as it reports it; 0 when unknown, implausible or not a
  // video: the default rate of what is rendered from it.
  virtual double fps() const { return 0.0; }
  // The path of the file the frames are read from (image and video sources), empty for noise and webcams:
  // what a caller compares with its output path, so it never writes over its own input.
  virtual std::string file() const { return ""; }
};

// Where frames come from, as --source names it and the GUI's source controls edit it.
enum class SourceKind { Noise, Image, Video, Webcam };
struct SourceSpec {
  SourceKind kind = SourceKind::Noise;
  std::string path;  // Image and Video: the file
  int webcam = 0;    // Webcam: /dev/videoN
  bool operator==(const SourceSpec&) const = default;
};

// --source's value: "noise" | "image:PATH" | "video:PATH" | "webcam" (device 0) | "webcam:N". Any other is
// an Error naming --source and the value.
SourceSpec parse_source_spec(const std::string& text);

// A missing/unreadable file, an image or video without a path, or an unavailable feature (no OpenCV) is a
// one-line Error naming the file or the source, and the only line printed: FFmpeg's own log, which OpenCV
// prints to stderr, is silenced at the first call.
std::unique_ptr<FrameSource> open_source(const SourceSpec& spec);

}  // namespace rtvd
