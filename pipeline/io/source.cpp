// The frame sources of source.h. Images load through png.h (so PNG works in every build) or OpenCV;
// video files and webcams need OpenCV. Every source is checked when it is opened: a file that cannot be
// read fails before the first frame is rendered, not in the middle of a run.
#include "pipeline/io/source.h"

#include <sys/stat.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "base/error.h"
#include "base/quoted_text.h"
#include "build_config.h"
#include "pipeline/io/image_ops.h"
#include "pipeline/io/png.h"
#include "pipeline/model_files/input_file.h"

#if RTVD_HAS_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#endif

namespace rtvd {

namespace {

bool has_png_signature(const std::string& path) {
  static constexpr std::array<char, 8> kSignature = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  std::array<char, 8> head{};
  std::ifstream in(path, std::ios::binary);
  return in.read(head.data(), head.size()) && head == kSignature;
}

// Crops to the frame's aspect ratio, then resizes: shapes are kept whatever the source's aspect ratio.
void fit_to_frame(const PixelView& view, int width, int height, std::vector<float>& rgb) {
  resize_to_rgb_float(center_crop(view, width, height), width, height, rgb);
}
void fit_to_frame(const PixelView& view, int width, int height, std::vector<uint8_t>& rgb) {
  resize_to_rgb8(center_crop(view, width, height), width, height, rgb);
}

class NoiseSource final : public FrameSource {
 public:
  std::string describe() const override { return "noise walk"; }
  bool has_images() const override { return false; }
  bool next(int, int, std::vector<float>&) override { return true; }
  bool next(int, int, std::vector<uint8_t>&) override { return true; }
};

// One still image for every frame; the resized copy is kept, since the frame size rarely changes.
class ImageSource final : public FrameSource {
 public:
  ImageSource(std::string path, ImageRgba8 image) : path_(std::move(path)), image_(std::move(image)) {}
  std::string describe() const override {
    return cat("image ", path_, " (", image_.width, "x", image_.height, ")");
  }
  bool has_images() const override { return true; }
  std::string file() const override { return path_; }
  int width() const override { return image_.width; }
  int height() const override { return image_.height; }
  bool next(int width, int height, std::vector<float>& rgb) override { return fit(width, height, floats_, rgb); }
  bool next(int width, int height, std::vector<uint8_t>& rgb) override { return fit(width, height, bytes_, rgb); }

 private:
  template <class T>
  struct Resized {
    std::vector<T> values;
    int width = 0, height = 0;
  };
  template <class T>
  bool fit(int width, int height, Resized<T>& resized, std::vector<T>& rgb) {
    if (width != resized.width || height != resized.height) {
      const PixelView view{image_.pixels.data(), image_.width, image_.height, 4, size_t(image_.width) * 4};
      fit_to_frame(view, width, height, resized.values);
      resized.width = width, resized.height = height;
    }
    rgb = resized.values;
    return true;
  }

  std::string path_;
  ImageRgba8 image_;
  Resized<float> floats_;
  Resized<uint8_t> bytes_;
};

#if RTVD_HAS_OPENCV

ImageRgba8 rgba_from_bgr(const cv::Mat& bgr) {
  ImageRgba8 image;
  image.width = bgr.cols;
  image.height = bgr.rows;
  image.pixels.resize(size_t(bgr.cols) * bgr.rows * 4);
  cv::Mat rgba(bgr.rows, bgr.cols, CV_8UC4, image.pixels.data());
  cv::cvtColor(bgr, rgba, cv::COLOR_BGR2RGBA);
  return image;
}

ImageRgba8 load_image(const std::string& path) {
  if (has_png_signature(path)) return read_png(path);
  const cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
  if (bgr.empty()) fail(path, ": not an image OpenCV can read");
  return rgba_from_bgr(bgr);
}

// OpenCV's FFmpeg backend sets FFmpeg's log level at every open: to $OPENCV_FFMPEG_LOGLEVEL where it is
// set (or $OPENCV_FFMPEG_DEBUG, for a user debugging a file), else to errors, which FFmpeg prints to
// stderr ("moov atom not found", "Invalid NAL unit size") before rtvd's own one-line error, and once per
// damaged frame while rendering. Setting the variable to AV_LOG_QUIET (-8) before the first open is the
// one switch that holds. The first open_source sets it, before any worker thread exists; later calls find
// it set and write nothing.
void quiet_ffmpeg_log() {
  if (!std::getenv("OPENCV_FFMPEG_LOGLEVEL") && !std::getenv("OPENCV_FFMPEG_DEBUG"))
    ::setenv("OPENCV_FFMPEG_LOGLEVEL", "-8", 0);
}

// A reported frame rate as fps() gives it: containers without one report 0, and some report a time base
// (90000) instead of a rate.
double plausible_fps(double fps) { return std::isfinite(fps) && fps > 0 && fps <= 1000 ? fps : 0.0; }

// Video files and webcams: OpenCV gives BGR frames of any size; next() converts, crops and resizes them.
class CaptureSource : public FrameSource {
 public:
  bool has_images() const override { return true; }
  double fps() const override { return fps_; }

 protected:
  template <class T>
  void convert(const cv::Mat& bgr, int width, int height, std::vector<T>& rgb) {
    cv::cvtColor(bgr, rgb8_, cv::COLOR_BGR2RGB);
    const PixelView view{rgb8_.data, rgb8_.cols, rgb8_.rows, 3, rgb8_.step[0]};
    fit_to_frame(view, width, height, rgb);
  }
  std::string fps_text() const { return fps_ > 0 ? cat(", ", fps_, " fps") : std::string(); }

  cv::Mat frame_, rgb8_;
  double fps_ = 0.0;
};

class VideoSource final : public CaptureSource {
 public:
  explicit VideoSource(std::string path) : path_(std::move(path)) {
    require_regular_file(path_, "no such video file");
    open();
    const double count = capture_.get(cv::CAP_PROP_FRAME_COUNT);
    frame_count_ = count >= 1 ? int(count) : -1;  // some containers do not store a frame count
  }
  std::string describe() const override {
    return cat("video ", path_, " (", width_, "x", height_, ", ",
               frame_count_ > 0 ? cat(frame_count_, " frames") : std::string("length unknown"), fps_text(), ")");
  }
  int frame_count() const override { return frame_count_; }
  std::string file() const override { return path_; }
  int width() const override { return width_; }
  int height() const override { return height_; }
  bool next(int width, int height, std::vector<float>& rgb) override { return read(width, height, rgb); }
  bool next(int width, int height, std::vector<uint8_t>& rgb) override { return read(width, height, rgb); }
  template <class T>
  bool read(int width, int height, std::vector<T>& rgb) {
    if (!first_frame_pending_ && !capture_.read(frame_)) return false;
    first_frame_pending_ = false;
    convert(frame_, width, height, rgb);
    return true;
  }
  // Reopening is the one rewind every backend supports exactly (seeking to frame 0 may land on a keyframe
  // elsewhere or be refused by a stream).
  void rewind() override { open(); }

 private:
  // Opens the file and decodes the first frame, so a file that does not decode fails now.
  void open() {
    // The FFmpeg backend only: others (GStreamer) print to stderr when they decline a file.
    if (!capture_.open(path_, cv::CAP_FFMPEG)) fail(path_, ": cannot open as a video (unknown format or no decoder)");
    if (!capture_.read(frame_) || frame_.empty()) fail(path_, ": video has no decodable frame");
    width_ = frame_.cols, height_ = frame_.rows;  // frame_ is emptied by the read that finds the end
    fps_ = plausible_fps(capture_.get(cv::CAP_PROP_FPS));
    first_frame_pending_ = true;
  }

  std::string path_;
  cv::VideoCapture capture_;
  int width_ = 0, height_ = 0, frame_count_ = -1;
  bool first_frame_pending_ = false;
};

class WebcamSource final : public CaptureSource {
 public:
  explicit WebcamSource(int index) : device_(cat("/dev/video", index)) {
    struct stat st {};
    if (::stat(device_.c_str(), &st) != 0) fail("no webcam at ", device_);
    if (!capture_.open(index, cv::CAP_V4L2)) fail(device_, ": cannot open the webcam (busy or not a camera)");
    if (!capture_.read(frame_) || frame_.empty()) fail(device_, ": webcam gives no frames");
    fps_ = plausible_fps(capture_.get(cv::CAP_PROP_FPS));
  }
  std::string describe() const override {
    return cat("webcam ", device_, " (", frame_.cols, "x", frame_.rows, fps_text(), ")");
  }
  int width() const override { return frame_.cols; }
  int height() const override { return frame_.rows; }
  bool next(int width, int height, std::vector<float>& rgb) override { return read(width, height, rgb); }
  bool next(int width, int height, std::vector<uint8_t>& rgb) override { return read(width, height, rgb); }

 private:
  template <class T>
  bool read(int width, int height, std::vector<T>& rgb) {
    // A camera has no end: a failed read means it was unplugged or stalled.
    if (!capture_.read(frame_) || frame_.empty()) fail(device_, ": webcam stopped giving frames");
    convert(frame_, width, height, rgb);
    return true;
  }

  std::string device_;
  cv::VideoCapture capture_;
};

#else

ImageRgba8 load_image(const std::string& path) {
  if (!has_png_signature(path)) fail(path, ": not a PNG, and rtvd was built without OpenCV (PNG images only)");
  return read_png(path);
}

#endif

std::unique_ptr<FrameSource> open_image(const std::string& path) {
  require_regular_file(path, "no such image file");
  return std::make_unique<ImageSource>(path, load_image(path));
}

// An image's or a video's file: the GUI's path box may be empty.
const std::string& source_file(const SourceSpec& spec, const char* kind) {
  if (spec.path.empty()) fail(kind, " source: no file given (expected a path)");
  return spec.path;
}

std::unique_ptr<FrameSource> open_webcam(int index) {
#if RTVD_HAS_OPENCV
  return std::make_unique<WebcamSource>(index);
#else
  (void)index;
  fail("rtvd was built without OpenCV: webcam sources need it");
#endif
}

std::unique_ptr<FrameSource> open_video(const std::string& path) {
#if RTVD_HAS_OPENCV
  return std::make_unique<VideoSource>(path);
#else
  (void)path;
  fail("rtvd was built without OpenCV: video sources need it");
#endif
}

}  // namespace

SourceSpec parse_source_spec(const std::string& text) {
  const auto refuse = [&](const std::string& expected) {
    fail("flag '--source': expected ", expected, ", got ", quote(text));
  };
  if (text == "noise") return {};
  if (text == "webcam") return {SourceKind::Webcam, "", 0};
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "webcam") {
    int index = 0;
    const char *begin = arg.data(), *end = arg.data() + arg.size();
    const auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec != std::errc() || ptr != end || begin == end || index < 0)
      refuse("webcam:N with N a device number, e.g. webcam:0");
    return {SourceKind::Webcam, "", index};
  }
  if (kind != "image" && kind != "video") refuse("noise, image:PATH, video:PATH, webcam or webcam:N");
  if (arg.empty()) refuse(kind + ":PATH");
  return {kind == "image" ? SourceKind::Image : SourceKind::Video, arg, 0};
}

std::unique_ptr<FrameSource> open_source(const SourceSpec& spec) {
#if RTVD_HAS_OPENCV
  quiet_ffmpeg_log();
#endif
  switch (spec.kind) {
    case SourceKind::Noise: return std::make_unique<NoiseSource>();
    case SourceKind::Image: return open_image(source_file(spec, "image"));
    case SourceKind::Video: return open_video(source_file(spec, "video"));
    case SourceKind::Webcam: return open_webcam(spec.webcam);
  }
  fail("unknown source kind ", int(spec.kind));
}

}  // namespace rtvd
