// Recorders: what lands on disk after finish(), what is left after an abandoned recording (nothing), and
// the up-front checks of the output path.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "pipeline/io/png.h"
#include "pipeline/io/recorder.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;

class RecorderTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_.path(name); }

  std::vector<std::string> listing(const fs::path& dir) const {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(fs::relative(e.path(), dir).string());
    std::sort(names.begin(), names.end());
    return names;
  }

  ImageRgba8 frame(int w, int h) {
    ImageRgba8 f{w, h, std::vector<uint8_t>(size_t(w) * h * 4)};
    for (auto& v : f.pixels) v = uint8_t(rng_.integer(0, 255));
    return f;
  }

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

TEST_F(RecorderTest, PngSequenceInANewDirectory) {
  SCOPED_TRACE(test::seed_trace(rng_));
  auto rec = open_recorder(path("a/frames/"), 5, 3, 10.0);
  EXPECT_EQ(rec->path(), path("a/frames/frame_%05d.png"));
  EXPECT_EQ(rec->codec(), "png");
  std::vector<ImageRgba8> frames;
  for (int i = 0; i < 3; ++i) {
    frames.push_back(frame(5, 3));
    rec->write(frames.back());
  }
  rec->finish();
  EXPECT_EQ(rec->frames_written(), 3);
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

TEST_F(RecorderTest, AbandonedPngSequenceRemovesItsFramesAndTheDirectoriesItMade) {
  SCOPED_TRACE(test::seed_trace(rng_));
  fs::create_directories(path("keep"));
  std::FILE* other = std::fopen(path("keep/other.txt").c_str(), "w");
  std::fclose(other);
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
  std::FILE* f = std::fopen(path("file").c_str(), "w");
  std::fclose(f);
  EXPECT_NE(error_of([&] { open_recorder(path("file/x.mp4"), 16, 16, 10.0); }).find("file"), std::string::npos);
}

TEST_F(RecorderTest, BadOutputNamesAndSettings) {
  const std::string expected_kinds = "expected a .mp4/.mkv/.avi file, a directory ending in '/', or a %d .png";
  EXPECT_NE(error_of([&] { open_recorder(path("x.gif"), 16, 16, 10.0); }).find(expected_kinds), std::string::npos);
  for (const std::string bad : {"f/%d%d.png", "f/%s.png", "f%d/x.png", "f/%05d.jpg", "f/%"})
    EXPECT_NE(error_of([&] { open_recorder(path(bad), 16, 16, 10.0); }).find("expected one %d"), std::string::npos)
        << bad;
  EXPECT_NE(error_of([&] { open_recorder(path("f/"), 0, 16, 10.0); }).find("positive"), std::string::npos);
  EXPECT_NE(error_of([&] { open_recorder(path("f/"), 16, 16, 0.0); }).find("frame rate"), std::string::npos);
  EXPECT_TRUE(listing(dir_).empty());
}

TEST_F(RecorderTest, Mp4IsWrittenUnderATemporaryNameAndMovedIntoPlace) {
  if (!video_recording_available()) {
    EXPECT_NE(error_of([&] { open_recorder(path("v.mp4"), 32, 32, 10.0); }).find("without OpenCV"),
              std::string::npos);
    GTEST_SKIP() << "built without OpenCV: no video recording";
  }
  SCOPED_TRACE(test::seed_trace(rng_));
  auto rec = open_recorder(path("out/v.mp4"), 32, 24, 10.0);
  EXPECT_EQ(rec->codec(), "h264");
  for (int i = 0; i < 3; ++i) rec->write(frame(32, 24));
  EXPECT_EQ(listing(path("out")), (std::vector<std::string>{".v.partial.mp4"}));
  rec->finish();
  EXPECT_EQ(listing(path("out")), (std::vector<std::string>{"v.mp4"}));
  EXPECT_GT(fs::file_size(path("out/v.mp4")), 0u);

  if (std::system("ffprobe -version > /dev/null 2>&1") != 0) GTEST_SKIP() << "ffprobe is not installed";
  const std::string cmd = "ffprobe -v error -count_frames -select_streams v:0 -show_entries "
                          "stream=codec_name,width,height,nb_read_frames -of csv=p=0 " + path("out/v.mp4");
  std::FILE* p = ::popen(cmd.c_str(), "r");
  char buf[128] = {};
  ASSERT_NE(std::fgets(buf, sizeof buf, p), nullptr);
  ::pclose(p);
  EXPECT_EQ(std::string(buf), "h264,32,24,3\n");
}

TEST_F(RecorderTest, AbandonedMp4LeavesNothing) {
  if (!video_recording_available()) GTEST_SKIP() << "built without OpenCV: no video recording";
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

}  // namespace
}  // namespace rtvd
