// Frame sources: where each frame starts. The noise walk needs no image (the engine draws the noise
// itself); image, video and webcam sources give an RGB image per frame for img2img at a strength.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace rtvd {

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  virtual std::string describe() const = 0;  // "noise walk", "video clip.mp4 (640x360, 120 frames)"
  virtual bool has_images() const = 0;       // false for the noise walk
  // The next frame resized to (width, height) as RGB floats in [-1, 1], (height, width, 3) row-major.
  // Returns false at the end of the stream (a video's last frame); a read error throws Error.
  virtual bool next(int width, int height, std::vector<float>& rgb) = 0;
  virtual int frame_count() const { return -1; }  // known length (video files), -1 unknown/endless
  virtual void rewind() {}                         // restart a video from its first frame
};

// "noise" | "image:PATH" | "video:PATH" | "webcam" | "webcam:N". A bad spec, a missing/unreadable
// file or an unavailable feature (no OpenCV) is a one-line Error naming the file or the spec.
std::unique_ptr<FrameSource> open_source(const std::string& spec);

}  // namespace rtvd
