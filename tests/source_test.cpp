// Frame sources: spec parsing, the image source, a video written by the recorder and read back, and the
// one-line errors for files and devices that are not there.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "build_config.h"
#include "kernels/common/error.h"
#include "pipeline/io/image_ops.h"
#include "pipeline/io/png.h"
#include "pipeline/io/recorder.h"
#include "pipeline/io/source.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;

class SourceTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_.path(name); }

  test::TempDir temp_{"rtvd_source_test"};
  const fs::path& dir_ = temp_.dir();
  test::Rng rng_;
};

std::string error_of(const std::string& spec) {
  try {
    open_source(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

ImageRgba8 solid(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  ImageRgba8 image{w, h, {}};
  for (int i = 0; i < w * h; ++i) image.pixels.insert(image.pixels.end(), {r, g, b, 255});
  return image;
}

TEST_F(SourceTest, NoiseHasNoImages) {
  auto s = open_source("noise");
  EXPECT_FALSE(s->has_images());
  EXPECT_EQ(s->describe(), "noise walk");
  EXPECT_EQ(s->frame_count(), -1);
}

TEST_F(SourceTest, PngImageGivesTheSameResizedImageEveryFrame) {
  SCOPED_TRACE(test::seed_trace(rng_));
  ImageRgba8 image{7, 5, std::vector<uint8_t>(7 * 5 * 4)};
  for (auto& v : image.pixels) v = uint8_t(rng_.integer(0, 255));
  write_png(path("in.png"), image);
  auto s = open_source("image:" + path("in.png"));
  EXPECT_TRUE(s->has_images());
  EXPECT_EQ(s->describe(), "image " + path("in.png") + " (7x5)");

  std::vector<float> want;
  resize_to_rgb_float(PixelView{image.pixels.data(), 7, 5, 4, 7 * 4}, 4, 3, want);
  for (int frame = 0; frame < 3; ++frame) {
    std::vector<float> got;
    ASSERT_TRUE(s->next(4, 3, got));
    EXPECT_EQ(got, want);
  }
  std::vector<float> bigger;
  ASSERT_TRUE(s->next(9, 9, bigger));
  EXPECT_EQ(bigger.size(), 9u * 9 * 3);
}

TEST_F(SourceTest, BadSpecsAndMissingFilesAreOneLineErrors) {
  EXPECT_EQ(error_of("noisy"), "unknown source 'noisy': expected noise, image:PATH, video:PATH, webcam or webcam:N");
  EXPECT_EQ(error_of("noise:1"), "unknown source 'noise:1': expected noise, image:PATH, video:PATH, webcam or webcam:N");
  EXPECT_EQ(error_of("image:"), "source 'image:': expected image:PATH");
  EXPECT_EQ(error_of("image:" + path("none.png")), path("none.png") + ": no such image file");
  EXPECT_EQ(error_of("webcam:x"), "source 'webcam:x': expected webcam:N with N a device number, e.g. webcam:0");
  EXPECT_EQ(error_of("webcam:"), "source 'webcam:': expected webcam:N with N a device number, e.g. webcam:0");
  std::ofstream(path("text.txt")) << "not an image";
  EXPECT_NE(error_of("image:" + path("text.txt")).find(path("text.txt") + ": not "), std::string::npos);
#if RTVD_HAS_OPENCV
  EXPECT_EQ(error_of("video:/nonexistent.mp4"), "/nonexistent.mp4: no such video file");
  EXPECT_EQ(error_of("webcam:99"), "no webcam at /dev/video99");
  std::ofstream(path("garbage.mp4")) << std::string(4000, 'x');
  EXPECT_NE(error_of("video:" + path("garbage.mp4")).find(path("garbage.mp4") + ": cannot open as a video"),
            std::string::npos);
#else
  EXPECT_EQ(error_of("video:/nonexistent.mp4"), "rtvd was built without OpenCV: video sources need it");
  EXPECT_EQ(error_of("webcam"), "rtvd was built without OpenCV: webcam sources need it");
#endif
}

TEST_F(SourceTest, VideoFramesInOrderThenEndThenRewind) {
  if (!video_recording_available()) GTEST_SKIP() << "built without OpenCV: no video files";
  // Flat colours survive H.264 within a few levels; each frame is told apart by its colour.
  const std::vector<ImageRgba8> frames = {solid(32, 32, 200, 40, 40), solid(32, 32, 40, 200, 40),
                                          solid(32, 32, 40, 40, 200), solid(32, 32, 220, 220, 40)};
  auto rec = open_recorder(path("clip.mp4"), 32, 32, 10.0);
  for (const auto& f : frames) rec->write(f);
  rec->finish();

  auto s = open_source("video:" + path("clip.mp4"));
  EXPECT_EQ(s->frame_count(), 4);
  EXPECT_EQ(s->describe(), "video " + path("clip.mp4") + " (32x32, 4 frames)");
  std::vector<float> rgb;
  auto expect_frame = [&](int i) {
    SCOPED_TRACE(testing::Message() << "frame " << i);
    ASSERT_TRUE(s->next(16, 8, rgb));
    ASSERT_EQ(rgb.size(), 16u * 8 * 3);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(rgb[c], frames[i].pixels[c] / 127.5 - 1.0, 0.08) << "channel " << c;
  };
  for (int i = 0; i < 4; ++i) expect_frame(i);
  EXPECT_FALSE(s->next(16, 8, rgb));
  s->rewind();
  expect_frame(0);
  expect_frame(1);
}

}  // namespace
}  // namespace rtvd
