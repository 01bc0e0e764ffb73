// The PNG sequence recorder. Each frame is written under a hidden temporary name and renamed into place,
// so a frame file is never half-written, even when the process is killed. Once the sequence is complete,
// frames of an older sequence of the same pattern numbered past the last new one are removed: the directory
// then holds one sequence, not a mix.
#include "pipeline/io/png_sequence.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "pipeline/io/output_files.h"
#include "pipeline/io/png.h"

namespace rtvd {

namespace {

namespace fs = std::filesystem;

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

  // The index whose name() is exactly path, or -1: a file this pattern could have written.
  int index_of(const fs::path& path) const {
    const std::string file = path.filename().string(), head = fs::path(prefix).filename().string();
    if (file.size() <= head.size() + suffix.size() || !file.starts_with(head) || !file.ends_with(suffix)) return -1;
    const std::string middle = file.substr(head.size(), file.size() - head.size() - suffix.size());
    const size_t first = middle.find_first_not_of(' ');
    if (first == std::string::npos) return -1;
    long long index = -1;
    const auto [end, ec] = std::from_chars(middle.data() + first, middle.data() + middle.size(), index);
    if (ec != std::errc() || end != middle.data() + middle.size() || index < 0 || index > INT_MAX) return -1;
    return fs::path(name(int(index))).filename() == path.filename() ? int(index) : -1;
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
  PngSequenceRecorder(const std::string& output, std::string pattern_text, int width, int height)
      : path_(std::move(pattern_text)),
        pattern_(parse_pattern(path_)),
        directory_(output, fs::path(pattern_.prefix).parent_path()),
        width_(width),
        height_(height) {}

  // Abandoned: what it wrote goes. After a failure the frames written are kept, as the error said.
  ~PngSequenceRecorder() override {
    if (finished_ || !failure_.empty()) return;
    std::error_code ec;
    for (int i = 0; i < frames_; ++i) fs::remove(pattern_.name(i), ec);
    directory_.remove_created();
  }

  void write(const ImageRgba8& frame) override {
    if (!failure_.empty()) throw RecordingFailed(failure_);
    if (finished_) fail(path_, ": frame written after the recording was finished");
    check_frame_size(path_, frame, width_, height_);
    const fs::path file = pattern_.name(frames_);
    const fs::path temp = file.parent_path() / cat(".", file.filename().string(), ".partial");
    try {
      write_png(temp.string(), frame);
    } catch (const Error& e) {
      // write_png names the file it wrote and removes it; the user knows the frame by its final name.
      std::string why = e.what();
      if (why.starts_with(temp.string() + ": ")) why.erase(0, temp.string().size() + 2);
      stop(cat("frame ", frames_, " (", file.filename().string(), "): ", why));
    }
    std::error_code ec;
    fs::rename(temp, file, ec);
    if (ec) {
      fs::remove(temp, ec);
      stop(cat("cannot move frame ", frames_, " into place as ", file.string(), ": ", ec.message()));
    }
    ++frames_;
  }

  void finish() override {
    if (!failure_.empty()) throw RecordingFailed(failure_);
    if (frames_ == 0) fail(path_, ": no frames were written");
    remove_older_frames();
    finished_ = true;
  }

  const std::string& path() const override { return path_; }
  int frames_written() const override { return frames_; }
  const std::string& codec() const override {
    static const std::string kPng = "png";
    return kPng;
  }
  const std::string& note() const override { return note_; }

 private:
  [[noreturn]] void stop(const std::string& what) {
    const std::string space = free_space_text(directory_.path());
    if (frames_ == 0) directory_.remove_created();
    failure_ = cat(path_, ": ", what, space.empty() ? "" : "; " + space, "; recording stopped, ",
                   frames_ == 0 ? "no frame was written" : cat("frames 0 to ", frames_ - 1, " are written"));
    throw RecordingFailed(failure_);
  }

  // Only files that this pattern names exactly, numbered past the last frame of this recording.
  void remove_older_frames() {
    std::vector<std::pair<int, fs::path>> older;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(directory_.path(), ec)) {
      const int index = pattern_.index_of(entry.path());
      if (index >= frames_ && entry.is_regular_file(ec)) older.emplace_back(index, entry.path());
    }
    std::sort(older.begin(), older.end());
    int removed = 0;
    for (const auto& [index, file] : older) removed += fs::remove(file, ec) ? 1 : 0;
    if (removed > 0)
      note_ = cat("removed ", removed, " frame", removed == 1 ? "" : "s", " of an older sequence (",
                  older.front().second.filename().string(), " to ", older.back().second.filename().string(),
                  ") from ", directory_.path().string());
  }

  std::string path_;
  FramePattern pattern_;
  OutputDirectory directory_;
  int width_, height_;
  int frames_ = 0;
  bool finished_ = false;
  std::string failure_, note_;
};

}  // namespace

std::unique_ptr<Recorder> open_png_sequence(const std::string& output, const std::string& pattern, int width,
                                            int height) {
  return std::make_unique<PngSequenceRecorder>(output, pattern, width, height);
}

}  // namespace rtvd
