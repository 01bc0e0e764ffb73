// The frame sources of source.h. Images load through png.h (so PNG works in every build) or OpenCV;
// video files and webcams need OpenCV. Every source is checked when it is opened: a file that cannot be
// read fails before the first frame is rendered, not in the middle of a run.
#include "pipeline/io/source.h"

#include <sys/stat.h>

#include <array>
#include <charconv>
#include <fstream>

#include "build_config.h"
#include "kernels/common/error.h"
#include "pipeline/io/image_ops.h"
#include "pipeline/io/png.h"

#if RTVD_HAS_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#endif

namespace rtvd {

namespace {

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool has_png_signature(const std::string& path) {
  static constexpr std::array<char, 8> kSignature = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  std::array<char, 8> head{};
  std::ifstream in(path, std::ios::binary);
  return in.read(head.data(), head.size()) && head == kSignature;
}

class NoiseSource final : public FrameSource {
 public:
  std::string describe() const override { return "noise walk"; }
  bool has_images() const override { return false; }
  bool next(int, int, std::vector<float>&) override { return true; }
};

// One still image for every frame; the resized copy is kept, since the frame size rarely changes.
class ImageSource final : public FrameSource {
 public:
  ImageSource(std::string path, ImageRgba8 image) : path_(std::move(path)), image_(std::move(image)) {}
  std::string describe() const override {
    return cat("image ", path_, " (", image_.width, "x", image_.height, ")");
  }
  bool has_images() const override { return true; }
  bool next(int width, int height, std::vector<float>& rgb) override {
    if (width != resized_width_ || height != resized_height_) {
      const PixelView view{image_.pixels.data(), image_.width, image_.height, 4, size_t(image_.width) * 4};
      resize_to_rgb_float(view, width, height, resized_);
      resized_width_ = width, resized_height_ = height;
    }
    rgb = resized_;
    return true;
  }

 private:
  std::string path_;
  ImageRgba8 image_;
  std::vector<float> resized_;
  int resized_width_ = 0, resized_height_ = 0;
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

// Video files and webcams: OpenCV gives BGR frames of any size; next() converts and resizes them.
class CaptureSource : public FrameSource {
 public:
  bool has_images() const override { return true; }

 protected:
  void convert(const cv::Mat& bgr, int width, int height, std::vector<float>& rgb) {
    cv::cvtColor(bgr, rgb8_, cv::COLOR_BGR2RGB);
    const PixelView view{rgb8_.data, rgb8_.cols, rgb8_.rows, 3, rgb8_.step[0]};
    resize_to_rgb_float(view, width, height, rgb);
  }

  cv::Mat frame_, rgb8_;
};

class VideoSource final : public CaptureSource {
 public:
  explicit VideoSource(std::string path) : path_(std::move(path)) {
    if (!is_regular_file(path_)) fail(path_, ": no such video file");
    open();
    const double count = capture_.get(cv::CAP_PROP_FRAME_COUNT);
    frame_count_ = count >= 1 ? int(count) : -1;  // some containers do not store a frame count
  }
  std::string describe() const override {
    return cat("video ", path_, " (", width_, "x", height_, ", ",
               frame_count_ > 0 ? cat(frame_count_, " frames") : std::string("length unknown"), ")");
  }
  int frame_count() const override { return frame_count_; }
  bool next(int width, int height, std::vector<float>& rgb) override {
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
  }
  std::string describe() const override { return cat("webcam ", device_, " (", frame_.cols, "x", frame_.rows, ")"); }
  bool next(int width, int height, std::vector<float>& rgb) override {
    // A camera has no end: a failed read means it was unplugged or stalled.
    if (!capture_.read(frame_) || frame_.empty()) fail(device_, ": webcam stopped giving frames");
    convert(frame_, width, height, rgb);
    return true;
  }

 private:
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
  if (!is_regular_file(path)) fail(path, ": no such image file");
  return std::make_unique<ImageSource>(path, load_image(path));
}

// "webcam" is device 0; "webcam:N" device N.
std::unique_ptr<FrameSource> open_webcam(const std::string& spec) {
  int index = 0;
  if (spec != "webcam") {
    const char *begin = spec.data() + std::string("webcam:").size(), *end = spec.data() + spec.size();
    const auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec != std::errc() || ptr != end || begin == end || index < 0)
      fail("source '", spec, "': expected webcam:N with N a device number, e.g. webcam:0");
  }
#if RTVD_HAS_OPENCV
  return std::make_unique<WebcamSource>(index);
#else
  fail("rtvd was built without OpenCV: webcam sources need it");
#endif
}

}  // namespace

std::unique_ptr<FrameSource> open_source(const std::string& spec) {
  if (spec == "noise") return std::make_unique<NoiseSource>();
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "webcam") return open_webcam(spec);
  if ((kind == "image" || kind == "video") && arg.empty())
    fail("source '", spec, "': expected ", kind, ":PATH");
  if (kind == "image") return open_image(arg);
  if (kind == "video") {
#if RTVD_HAS_OPENCV
    return std::make_unique<VideoSource>(arg);
#else
    fail("rtvd was built without OpenCV: video sources need it");
#endif
  }
  fail("unknown source '", spec, "': expected noise, image:PATH, video:PATH, webcam or webcam:N");
}

}  // namespace rtvd
