// Recorders: what lands on disk after finish(), what is left after an abandoned recording (nothing), the
// up-front checks of the output path, and what is kept when writes fail or the process is killed, as
// ffprobe (support/ffprobe.h) reads it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "pipeline/io/png.h"
#include "pipeline/io/recorder.h"
#include "support/ffprobe.h"
#include "support/process.h"
#include "support/test_util.h"
#include "support/write_limits.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using test::read_file;

class RecorderTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_.path(name); }

  std::vector<std::string> listing(const fs::path& dir) const {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(fs::relative(e.path(), dir).string());
    std::sort(names.begin(), names.end());
    return names;
  }

  // Noise: it compresses badly, so a few frames fill a small file system.
  ImageRgba8 frame(int w, int h) {
    ImageRgba8 f{w, h, std::vector<uint8_t>(size_t(w) * h * 4)};
    for (auto& v : f.pixels) v = uint8_t(rng_.integer(0, 255));
    return f;
  }

  void write_text(const std::string& file, const std::string& text) const { std::ofstream(file) << text; }

  test::TempDir temp_{"rtvd_recorder_test"};
  const fs::path& dir_ = temp_.dir();
  test::Rng rng_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an rtvd::Error";
  return "";
}

// The number N in "... the first N play from ..." of a RecordingFailed message, or -1.
int frames_kept(const std::string& message) {
  const size_t at = message.find("the first ");
  return at == std::string::npos ? -1 : std::atoi(message.c_str() + at + 10);
}

#define SKIP_WITHOUT_VIDEO()                                                                              \
  if (!video_recording_available()) GTEST_SKIP() << "built without FFmpeg's libraries: no video recording"; \
  if (!test::ffprobe_available()) GTEST_SKIP() << "ffprobe is not installed"

TEST_F(RecorderTest, PngSequenceInANewDirectory) {
  SCOPED_TRACE(test::seed_trace(rng_));
  auto rec = open_recorder(path("a/frames/"), 5, 3, 10.0);
  EXPECT_EQ(rec->path(), path("a/frames/frame_%05d.png"));
  EXPECT_EQ(rec->partial_path(), rec->path());
  EXPECT_EQ(rec->codec(), "png");
  std::vector<ImageRgba8> frames;
  for (int i = 0; i < 3; ++i) {
    frames.push_back(frame(5, 3));
    rec->write(frames.back());
  }
  rec->finish();
  EXPECT_EQ(rec->frames_written(), 3);
  EXPECT_EQ(rec->note(), "");
  rec.reset();
  EXPECT_EQ(listing(path("a/frames")),
            (std::vector<std::string>{"frame_00000.png", "frame_00001.png", "frame_00002.png"}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(read_png(path("a/frames/frame_0000" + std::to_string(i) + ".png")).pixels, frames[i].pixels);
}

TEST_F(RecorderTest, PngPatternAndExistingDirectoryWithoutSlash) {
  SCOPED_TRACE(test::seed_trace(rng_));
  auto rec = open_recorder(path("seq/f%03d.png"), 4, 4, 24.0);
  rec->write(frame(4, 4));
  rec->write(frame(4, 4));
  rec->finish();
  EXPECT_EQ(listing(path("seq")), (std::vector<std::string>{"f000.png", "f001.png"}));

  auto into_existing = open_recorder(path("seq"), 4, 4, 24.0);
  EXPECT_EQ(into_existing->path(), path("seq/frame_%05d.png"));
}

// A sequence written over a longer older one: the older one's later frames would be mixed into it.
TEST_F(RecorderTest, PngSequenceOverAnOlderOneRemovesTheOlderFramesPastItsEnd) {
  SCOPED_TRACE(test::seed_trace(rng_));
  auto older = open_recorder(path("seq/"), 4, 4, 24.0);
  for (int i = 0; i < 6; ++i) older->write(frame(4, 4));
  older->finish();
  // Names the pattern does not produce exactly are not the older sequence's, and stay.
  const std::vector<std::string> others = {"frame_7.png", "frame_000009.png", "frame_00009.png.bak", "notes.txt",
                                           "frame_00x10.png", "frame_-0001.png"};
  for (const std::string& name : others) write_text(path("seq/" + name), name);

  auto rec = open_recorder(path("seq/"), 4, 4, 24.0);
  std::vector<ImageRgba8> frames;
  for (int i = 0; i < 2; ++i) {
    frames.push_back(frame(4, 4));
    rec->write(frames.back());
  }
  rec->finish();
  EXPECT_EQ(rec->note(), "removed 4 frames of an older sequence (frame_00002.png to frame_00005.png) from " +
                             path("seq"));
  std::vector<std::string> expected = others;
  expected.insert(expected.end(), {"frame_00000.png", "frame_00001.png"});
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(listing(path("seq")), expected);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(read_png(path("seq/frame_0000" + std::to_string(i) + ".png")).pixels, frames[i].pixels);
}

TEST_F(RecorderTest, AbandonedPngSequenceRemovesItsFramesAndTheDirectoriesItMade) {
  SCOPED_TRACE(test::seed_trace(rng_));
  fs::create_directories(path("keep"));
  write_text(path("keep/other.txt"), "");
  open_recorder(path("keep/frames/"), 6, 2, 10.0)->write(frame(6, 2));  // destroyed unfinished
  open_recorder(path("keep/%02d.png"), 6, 2, 10.0)->write(frame(6, 2));
  EXPECT_EQ(listing(path("keep")), (std::vector<std::string>{"other.txt"}));

  { auto unused = open_recorder(path("x/y/z/"), 6, 2, 10.0); }
  EXPECT_FALSE(fs::exists(path("x")));
}

TEST_F(RecorderTest, FrameSizeMismatchAndFinishWithoutFrames) {
  SCOPED_TRACE(test::seed_trace(rng_));
  auto rec = open_recorder(path("f/"), 8, 8, 10.0);
  const std::string e = error_of([&] { rec->write(frame(8, 6)); });
  EXPECT_NE(e.find("frame is 8x6"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 8x8"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { rec->finish(); }).find("no frames were written"), std::string::npos);
}

TEST_F(RecorderTest, OutputsThatCannotBeWrittenFailUpFront) {
  for (const std::string out : {"/proc/rtvd_test.mp4", "/proc/rtvd_test_frames/"}) {
    const std::string e = error_of([&] { open_recorder(out, 16, 16, 10.0); });
    EXPECT_EQ(e.rfind(out + ": ", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_FALSE(fs::exists("/proc/rtvd_test_frames"));
  write_text(path("file"), "");
  EXPECT_NE(error_of([&] { open_recorder(path("file/x.mp4"), 16, 16, 10.0); }).find("file"), std::string::npos);
}

TEST_F(RecorderTest, BadOutputNamesAndSettings) {
  const std::string expected_kinds = "expected a .mp4/.mkv file, a directory ending in '/', or a %d .png";
  EXPECT_NE(error_of([&] { open_recorder(path("x.gif"), 16, 16, 10.0); }).find(expected_kinds), std::string::npos);
  EXPECT_EQ(error_of([&] { open_recorder(path("x.avi"), 16, 16, 10.0); }),
            path("x.avi") + ": AVI cannot be written safely (its index comes last); use .mkv or .mp4");
  for (const std::string bad : {"f/%d%d.png", "f/%s.png", "f%d/x.png", "f/%05d.jpg", "f/%"})
    EXPECT_NE(error_of([&] { open_recorder(path(bad), 16, 16, 10.0); }).find("expected one %d"), std::string::npos)
        << bad;
  EXPECT_NE(error_of([&] { open_recorder(path("f/"), 0, 16, 10.0); }).find("positive"), std::string::npos);
  for (const double fps : {0.0, 0.001, 0.999, 240.5, 1e9, -24.0})
    EXPECT_NE(error_of([&] { open_recorder(path("f/"), 16, 16, fps); }).find("frame rate must be from 1 to 240"),
              std::string::npos)
        << fps;
  EXPECT_TRUE(listing(dir_).empty());
}

TEST_F(RecorderTest, VideoIsWrittenUnderAPartialNameAndMovedIntoPlace) {
  if (!video_recording_available()) {
    EXPECT_NE(error_of([&] { open_recorder(path("v.mp4"), 32, 32, 10.0); }).find("without FFmpeg's libraries"),
              std::string::npos);
    GTEST_SKIP() << "built without FFmpeg's libraries: no video recording";
  }
  SKIP_WITHOUT_VIDEO();
  SCOPED_TRACE(test::seed_trace(rng_));
  for (const std::string ext : {".mp4", ".mkv"}) {
    SCOPED_TRACE(ext);
    auto rec = open_recorder(path("out/v" + ext), 32, 24, 10.0);
    EXPECT_EQ(rec->codec(), "h264") << "Debian's FFmpeg has libx264";
    EXPECT_EQ(rec->partial_path(), path("out/v.partial" + ext));
    for (int i = 0; i < 3; ++i) rec->write(frame(32, 24));
    EXPECT_EQ(listing(path("out")), (std::vector<std::string>{"v.partial" + ext}));
    rec->finish();
    EXPECT_EQ(listing(path("out")), (std::vector<std::string>{"v" + ext}));
    EXPECT_EQ(test::ffprobe_stream_entry(path("out/v" + ext), "codec_name,width,height,r_frame_rate"),
              "h264,32,24,10/1");
    EXPECT_EQ(test::ffprobe_frame_count(path("out/v" + ext)), 3);
    fs::remove_all(path("out"));
  }
}

TEST_F(RecorderTest, AbandonedVideoLeavesNothing) {
  if (!video_recording_available()) GTEST_SKIP() << "built without FFmpeg's libraries: no video recording";
  SCOPED_TRACE(test::seed_trace(rng_));
  open_recorder(path("v/w/x.mp4"), 16, 16, 10.0)->write(frame(16, 16));
  EXPECT_FALSE(fs::exists(path("v")));
  {
    auto rec = open_recorder(path("y.mkv"), 16, 16, 10.0);
    EXPECT_NE(error_of([&] { rec->finish(); }).find("no frames were written"), std::string::npos);
  }
  EXPECT_TRUE(listing(dir_).empty());
  EXPECT_NE(error_of([&] { open_recorder(path("odd.mp4"), 17, 16, 10.0); }).find("even width and height"),
            std::string::npos);
}

// What a killed recording left may be the only copy of it: a new recording to the same output refuses to
// start rather than write over it.
TEST_F(RecorderTest, APartialFileLeftByAKilledRecordingIsNeverOverwritten) {
  if (!video_recording_available()) GTEST_SKIP() << "built without FFmpeg's libraries: no video recording";
  write_text(path("v.partial.mp4"), "what a killed recording left");
  EXPECT_EQ(error_of([&] { open_recorder(path("v.mp4"), 16, 16, 10.0); }),
            path("v.mp4") + ": '" + path("v.partial.mp4") +
                "' is left from a recording that did not finish (it plays up to where that one stopped): move or "
                "delete it first");
  EXPECT_EQ(read_file(path("v.partial.mp4")), "what a killed recording left");
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"v.partial.mp4"}));
}

// A partial file that a live recorder holds (its lock, which another open of the file meets even in one
// process) is a recording in progress, and said to be; once that one is finished, the output is free.
TEST_F(RecorderTest, APartialFileBeingWrittenIsARecordingInProgress) {
  if (!video_recording_available()) GTEST_SKIP() << "built without FFmpeg's libraries: no video recording";
  std::unique_ptr<Recorder> first = open_recorder(path("v.mp4"), 16, 16, 10.0);
  EXPECT_EQ(error_of([&] { open_recorder(path("v.mp4"), 16, 16, 10.0); }),
            path("v.mp4") + ": another rtvd is writing this output (into '" + path("v.partial.mp4") +
                "'): wait for it to finish, or choose another output");
  first->write(frame(16, 16));
  first->finish();
  std::unique_ptr<Recorder> second = open_recorder(path("v.mp4"), 16, 16, 10.0);
  second->write(frame(16, 16));
  second->finish();
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"v.mp4"}));
}

// A process killed outright (no destructor, no trailer) leaves the partial file, and it plays up to the
// last complete fragment: at 5 frames/s a keyframe comes every 5 frames, so after 23 frames the fragments
// of frames 0-19 are in the file.
TEST_F(RecorderTest, AKilledRecordingPlaysUpToItsLastSecond) {
  SKIP_WITHOUT_VIDEO();
  SCOPED_TRACE(test::seed_trace(rng_));
  for (const std::string ext : {".mp4", ".mkv"}) {
    SCOPED_TRACE(ext);
    std::vector<ImageRgba8> frames;
    for (int i = 0; i < 23; ++i) frames.push_back(frame(32, 32));
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // never returns into the test runner
      try {
        auto rec = open_recorder(path("k" + ext), 32, 32, 5.0);
        for (const auto& f : frames) rec->write(f);
        ::raise(SIGKILL);  // with the recorder still open
      } catch (...) {
      }
      ::_exit(1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child died of something else";
    EXPECT_FALSE(fs::exists(path("k" + ext)));
    EXPECT_EQ(test::ffprobe_frame_count(path("k.partial" + ext)), 20);
  }
}

// A write that fails part-way: the recording stops with one line that names the file, the cause, the free
// space and where the frames written play from; the file there plays exactly those frames; the good
// file at the output path is untouched; later writes fail the same way.
void expect_stopped_recording(const std::string& message, const std::string& output, const std::string& partial,
                              const std::string& cause) {
  EXPECT_EQ(message.rfind(output + ": " + cause, 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find(" free in "), std::string::npos) << message;
  EXPECT_NE(message.find(" play from " + partial), std::string::npos) << message;
  EXPECT_EQ(message.find("encoder"), std::string::npos) << message;
  const int kept = frames_kept(message);
  EXPECT_GT(kept, 0) << message;
  EXPECT_EQ(test::ffprobe_frame_count(partial), kept) << message;
}

// Writes noise frames until the recording fails (or max frames are written): the failure's message.
std::string record_until_failure(Recorder& rec, const std::function<ImageRgba8()>& next, int max_frames) {
  for (int i = 0; i < max_frames; ++i) {
    try {
      rec.write(next());
    } catch (const RecordingFailed& e) {
      return e.what();
    }
  }
  return "";
}

TEST_F(RecorderTest, AFileSizeLimitStopsTheRecordingAndKeepsWhatWasWritten) {
  SKIP_WITHOUT_VIDEO();
  SCOPED_TRACE(test::seed_trace(rng_));
  for (const std::string ext : {".mp4", ".mkv"}) {
    SCOPED_TRACE(ext);
    const std::string output = path("v" + ext), partial = path("v.partial" + ext);
    write_text(output, "a good recording");
    std::string message;
    std::unique_ptr<Recorder> rec = open_recorder(output, 64, 64, 4.0);
    {
      const test::FileSizeLimit limit(64 << 10);  // about 16 frames of noise
      message = record_until_failure(*rec, [&] { return frame(64, 64); }, 400);
      EXPECT_THROW(rec->write(frame(64, 64)), RecordingFailed);
      EXPECT_THROW(rec->finish(), RecordingFailed);
    }
    rec.reset();
    expect_stopped_recording(message, output, partial, "the file reached the largest size allowed");
    EXPECT_EQ(read_file(output), "a good recording");
  }
}

TEST_F(RecorderTest, AFullDiskStopsTheRecordingAndKeepsWhatWasWritten) {
  SKIP_WITHOUT_VIDEO();
  SCOPED_TRACE(test::seed_trace(rng_));
  const test::SmallFilesystem disk(path("disk"), 96 << 10);
  if (!disk.mounted()) GTEST_SKIP() << disk.why_not();
  for (const std::string ext : {".mp4", ".mkv"}) {
    SCOPED_TRACE(ext);
    const std::string output = path("disk/v" + ext), partial = path("disk/v.partial" + ext);
    write_text(output, "a good recording");
    std::unique_ptr<Recorder> rec = open_recorder(output, 64, 64, 4.0);
    const std::string message = record_until_failure(*rec, [&] { return frame(64, 64); }, 400);
    rec.reset();
    expect_stopped_recording(message, output, partial, "disk full (no space left on device)");
    EXPECT_EQ(read_file(output), "a good recording");
    fs::remove(partial);
  }

  // A disk already full: the error is the disk, not the encoder, and nothing is left behind.
  disk.fill();
  const std::string full = error_of([&] { open_recorder(path("disk/w.mp4"), 64, 64, 4.0); });
  EXPECT_EQ(full.rfind(path("disk/w.mp4") + ": disk full (no space left on device); 0 B free in ", 0), 0u) << full;
  EXPECT_NE(full.find("nothing was kept"), std::string::npos) << full;
  EXPECT_FALSE(fs::exists(path("disk/w.partial.mp4")));
}

TEST_F(RecorderTest, AFullDiskStopsAPngSequenceAndKeepsItsFrames) {
  SCOPED_TRACE(test::seed_trace(rng_));
  const test::SmallFilesystem disk(path("disk"), 64 << 10);
  if (!disk.mounted()) GTEST_SKIP() << disk.why_not();
  std::unique_ptr<Recorder> rec = open_recorder(path("disk/frames/"), 64, 64, 4.0);
  const std::string message = record_until_failure(*rec, [&] { return frame(64, 64); }, 400);
  const int written = rec->frames_written();
  rec.reset();
  EXPECT_EQ(message.rfind(path("disk/frames/frame_%05d.png") + ": frame " + std::to_string(written), 0), 0u)
      << message;
  EXPECT_NE(message.find(": write failed: disk full (no space left on device); "), std::string::npos) << message;
  EXPECT_NE(message.find(" free in "), std::string::npos) << message;
  EXPECT_NE(message.find("frames 0 to " + std::to_string(written - 1) + " are written"), std::string::npos) << message;
  ASSERT_GT(written, 0);
  EXPECT_EQ(int(listing(path("disk/frames")).size()), written) << "no partial frame is left";
  for (int i = 0; i < written; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "disk/frames/frame_%05d.png", i);
    EXPECT_EQ(read_png(path(name)).width, 64) << name;
  }
}

}  // namespace
}  // namespace rtvd
