// The recorders of recorder.h. Both check the output up front (directory created if missing, a probe
// file created and removed), so an unwritable path fails before any frame is rendered, and both undo
// what they wrote when destroyed without finish().
#include "pipeline/io/recorder.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "build_config.h"
#include "kernels/common/error.h"
#include "pipeline/io/png.h"

#if RTVD_HAS_OPENCV
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#endif

namespace rtvd {

namespace {

namespace fs = std::filesystem;

// The directory output goes into: created when missing, remembering which levels were created so an
// abandoned recording can remove them again (only while empty: never anything it did not create).
class OutputDirectory {
 public:
  OutputDirectory(const std::string& output, const fs::path& dir) : path_(dir.empty() ? fs::path(".") : dir) {
    std::vector<fs::path> missing;
    std::error_code ec;
    for (fs::path p = path_; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (fs::create_directory(*it, ec)) {
        created_.push_back(*it);
      } else if (ec) {
        remove_created();
        fail(output, ": cannot create directory '", it->string(), "': ", ec.message());
      }
    }
    if (const std::string problem = check_writable(); !problem.empty()) {
      remove_created();
      fail(output, ": ", problem);
    }
  }

  const fs::path& path() const { return path_; }

  void remove_created() noexcept {
    std::error_code ec;
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) fs::remove(*it, ec);
  }

 private:
  // access(W_OK) says yes to root everywhere, and /proc or a read-only mount still refuse files: only
  // creating one tells. Returns what is wrong, or "".
  std::string check_writable() const {
    std::error_code ec;
    if (!fs::is_directory(path_, ec)) return cat("'", path_.string(), "' is not a directory");
    std::string probe = (path_ / ".rtvd-write-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) return cat("cannot write in directory '", path_.string(), "': ", std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
    return "";
  }

  fs::path path_;
  std::vector<fs::path> created_;  // outermost first
};

void check_frame_size(const std::string& path, const ImageRgba8& frame, int width, int height) {
  if (frame.width != width || frame.height != height || frame.pixels.size() != size_t(width) * height * 4)
    fail(path, ": frame is ", frame.width, "x", frame.height, " (", frame.pixels.size(), " bytes), expected ",
         width, "x", height, " RGBA, the size the recording was opened with");
}

// "dir/frame_%05d.png": a printf-style %d with optional zero padding and width, formatted here rather
// than by printf so a user's pattern is never a format string.
struct FramePattern {
  std::string prefix, suffix;
  int width = 0;
  bool zero_pad = false;

  std::string name(int index) const {
    std::string digits = std::to_string(index);
    if (int(digits.size()) < width) digits.insert(0, size_t(width) - digits.size(), zero_pad ? '0' : ' ');
    return prefix + digits + suffix;
  }
};

FramePattern parse_pattern(const std::string& output) {
  const std::string expected = ": expected one %d in the file name of a .png pattern, e.g. frames/%05d.png";
  const size_t percent = output.find('%');
  const size_t slash = output.rfind('/');
  if (output.find('%', percent + 1) != std::string::npos || (slash != std::string::npos && slash > percent))
    fail(output, expected);
  FramePattern p;
  size_t i = percent + 1;
  if (i < output.size() && output[i] == '0') p.zero_pad = true, ++i;
  for (; i < output.size() && std::isdigit(static_cast<unsigned char>(output[i])); ++i)
    p.width = std::min(p.width * 10 + (output[i] - '0'), 100);
  if (i >= output.size() || output[i] != 'd') fail(output, expected);
  p.prefix = output.substr(0, percent);
  p.suffix = output.substr(i + 1);
  if (!p.suffix.ends_with(".png")) fail(output, expected);
  return p;
}

class PngSequenceRecorder final : public Recorder {
 public:
  // output: what the user asked for, named by the errors of the up-front checks.
  PngSequenceRecorder(const std::string& output, std::string pattern_text, FramePattern pattern, int width,
                      int height)
      : path_(std::move(pattern_text)),
        pattern_(std::move(pattern)),
        directory_(output, fs::path(pattern_.prefix).parent_path()),
        width_(width),
        height_(height) {}

  ~PngSequenceRecorder() override {
    if (finished_) return;
    std::error_code ec;
    for (const auto& file : written_) fs::remove(file, ec);
    directory_.remove_created();
  }

  void write(const ImageRgba8& frame) override {
    if (finished_) fail(path_, ": frame written after the recording was finished");
    check_frame_size(path_, frame, width_, height_);
    std::string file = pattern_.name(int(written_.size()));
    write_png(file, frame);
    written_.push_back(std::move(file));
  }

  void finish() override {
    if (written_.empty()) fail(path_, ": no frames were written");
    finished_ = true;
  }

  const std::string& path() const override { return path_; }
  int frames_written() const override { return int(written_.size()); }
  const std::string& codec() const override {
    static const std::string kPng = "png";
    return kPng;
  }

 private:
  std::string path_;
  FramePattern pattern_;
  OutputDirectory directory_;
  int width_, height_;
  std::vector<std::string> written_;
  bool finished_ = false;
};

#if RTVD_HAS_OPENCV

struct Codec {
  char fourcc[5];
  const char* name;
};
// H.264 plays everywhere; MPEG-4 part 2 only when the FFmpeg behind OpenCV has no H.264 encoder.
constexpr Codec kCodecs[] = {{"avc1", "h264"}, {"mp4v", "mpeg4"}};

// Encodes into ".NAME.partial.EXT" beside the output (same extension, so the container is chosen the
// same way) and renames it into place once the file is complete and playable.
class VideoRecorder final : public Recorder {
 public:
  VideoRecorder(std::string path, int width, int height, double fps)
      : path_(std::move(path)), directory_(path_, fs::path(path_).parent_path()), width_(width), height_(height) {
    const fs::path final_path(path_);
    temp_ = (directory_.path() / cat(".", final_path.stem().string(), ".partial", final_path.extension().string()))
                .string();
    for (const Codec& c : kCodecs) {
      // The FFmpeg backend only: others (GStreamer) print to stderr when they decline a file.
      const int fourcc = cv::VideoWriter::fourcc(c.fourcc[0], c.fourcc[1], c.fourcc[2], c.fourcc[3]);
      if (writer_.open(temp_, cv::CAP_FFMPEG, fourcc, fps, cv::Size(width, height), true)) {
        codec_ = c.name;
        return;
      }
    }
    cleanup();
    fail(path_, ": OpenCV's FFmpeg backend has no H.264 (avc1) or MPEG-4 (mp4v) encoder for this file type");
  }

  ~VideoRecorder() override {
    if (!finished_) cleanup();
  }

  void write(const ImageRgba8& frame) override {
    if (finished_) fail(path_, ": frame written after the recording was finished");
    check_frame_size(path_, frame, width_, height_);
    const cv::Mat rgba(height_, width_, CV_8UC4, const_cast<uint8_t*>(frame.pixels.data()));
    cv::cvtColor(rgba, bgr_, cv::COLOR_RGBA2BGR);
    writer_.write(bgr_);
    ++frames_;
  }

  void finish() override {
    if (frames_ == 0) fail(path_, ": no frames were written");
    writer_.release();  // writes the index (moov atom): only now is the file playable
    std::error_code ec;
    fs::rename(temp_, path_, ec);
    if (ec) fail(path_, ": cannot move the finished video into place: ", ec.message());
    finished_ = true;
  }

  const std::string& path() const override { return path_; }
  int frames_written() const override { return frames_; }
  const std::string& codec() const override { return codec_; }

 private:
  void cleanup() noexcept {
    writer_.release();
    std::error_code ec;
    fs::remove(temp_, ec);
    directory_.remove_created();
  }

  std::string path_, temp_, codec_;
  OutputDirectory directory_;
  int width_, height_;
  cv::VideoWriter writer_;
  cv::Mat bgr_;
  int frames_ = 0;
  bool finished_ = false;
};

#endif

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

}  // namespace

std::unique_ptr<Recorder> open_recorder(const std::string& output, int width, int height, double fps) {
  if (output.empty()) fail("output path is empty");
  if (width <= 0 || height <= 0) fail(output, ": frame size must be positive, got ", width, "x", height);
  if (!(fps > 0) || !std::isfinite(fps)) fail(output, ": frame rate must be a positive number, got ", fps);

  std::error_code ec;
  if (output.ends_with('/') || fs::is_directory(output, ec)) {
    const std::string dir = output.ends_with('/') ? output : output + "/";
    const std::string pattern = dir + "frame_%05d.png";
    return std::make_unique<PngSequenceRecorder>(output, pattern, parse_pattern(pattern), width, height);
  }
  if (output.find('%') != std::string::npos)
    return std::make_unique<PngSequenceRecorder>(output, output, parse_pattern(output), width, height);

  const std::string ext = lower_extension(output);
  if (ext != ".mp4" && ext != ".mkv" && ext != ".avi")
    fail(output, ": expected a .mp4/.mkv/.avi file, a directory ending in '/', or a %d .png pattern");
#if RTVD_HAS_OPENCV
  // H.264 in 4:2:0 halves chroma both ways; FFmpeg would silently crop an odd size by one pixel.
  if (width % 2 != 0 || height % 2 != 0)
    fail(output, ": video needs an even width and height, got ", width, "x", height, " (or record PNG frames)");
  return std::make_unique<VideoRecorder>(output, width, height, fps);
#else
  fail(output, ": rtvd was built without OpenCV, so it records PNG frames only (e.g. -o out/frames/)");
#endif
}

bool video_recording_available() { return RTVD_HAS_OPENCV; }

}  // namespace rtvd
