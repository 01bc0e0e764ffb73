// Frame sources: --source parsing, the image source, videos written by the recorder and by ffmpeg read back,
// cropping to the frame's aspect ratio against OpenCV's resize of the same region, frame rates, and the
// one-line errors for files and devices that are not there or do not decode.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "pipeline/io/image_ops.h"
#include "pipeline/io/png.h"
#include "pipeline/io/recorder.h"
#include "pipeline/io/source.h"
#include "support/process.h"
#include "support/test_util.h"

#if RTVD_HAS_OPENCV && __has_include(<opencv2/imgproc.hpp>)
#define RTVD_TEST_HAS_OPENCV 1
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#else
#define RTVD_TEST_HAS_OPENCV 0
#endif

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

SourceSpec image_file(const std::string& path) { return {SourceKind::Image, path, 0}; }
SourceSpec video_file(const std::string& path) { return {SourceKind::Video, path, 0}; }
SourceSpec webcam(int index) { return {SourceKind::Webcam, "", index}; }

std::string error_of(const SourceSpec& spec) {
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

bool have_ffmpeg() { return std::system("ffmpeg -version > /dev/null 2>&1") == 0; }

// A clip from FFmpeg's test pattern, encoded by the ffmpeg tool: an encoder independent of rtvd's recorder.
void ffmpeg_clip(const std::string& path, int width, int height, const std::string& rate, int frames,
                 const std::string& extra = "") {
  const std::string cmd = "ffmpeg -v error -y -f lavfi -i testsrc2=size=" + std::to_string(width) + "x" +
                          std::to_string(height) + ":rate=" + rate + " -frames:v " + std::to_string(frames) +
                          " -pix_fmt yuv420p " + extra + " " + path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST_F(SourceTest, NoiseHasNoImages) {
  auto s = open_source({});
  EXPECT_FALSE(s->has_images());
  EXPECT_EQ(s->describe(), "noise walk");
  EXPECT_EQ(s->frame_count(), -1);
  EXPECT_EQ(s->fps(), 0.0);
  EXPECT_EQ(s->file(), "");
}

TEST_F(SourceTest, PngImageGivesTheSameResizedImageEveryFrame) {
  SCOPED_TRACE(test::seed_trace(rng_));
  ImageRgba8 image{7, 5, std::vector<uint8_t>(7 * 5 * 4)};
  for (auto& v : image.pixels) v = uint8_t(rng_.integer(0, 255));
  write_png(path("in.png"), image);
  auto s = open_source(image_file(path("in.png")));
  EXPECT_TRUE(s->has_images());
  EXPECT_EQ(s->describe(), "image " + path("in.png") + " (7x5)");
  EXPECT_EQ(s->file(), path("in.png"));
  EXPECT_EQ(s->fps(), 0.0);

  std::vector<float> want;  // 7x5 cropped to 4:3 is its centred 7x5 (7 * 3 / 4 = 5.25 rounds to 5)
  resize_to_rgb_float(PixelView{image.pixels.data(), 7, 5, 4, 7 * 4}, 4, 3, want);
  for (int frame = 0; frame < 3; ++frame) {
    std::vector<float> got;
    ASSERT_TRUE(s->next(4, 3, got));
    EXPECT_EQ(got, want);
  }
  std::vector<float> bigger;
  ASSERT_TRUE(s->next(9, 9, bigger));
  EXPECT_EQ(bigger.size(), 9u * 9 * 3);

  // In 8-bit RGB, the same resize's bytes, whichever size was asked before.
  std::vector<uint8_t> want8;
  resize_to_rgb8(PixelView{image.pixels.data(), 7, 5, 4, 7 * 4}, 4, 3, want8);
  for (int frame = 0; frame < 2; ++frame) {
    std::vector<uint8_t> got;
    ASSERT_TRUE(s->next(4, 3, got));
    EXPECT_EQ(got, want8);
  }
}

// --source is parsed once, at the command line; open_source takes what it parsed.
TEST(SourceSpecs, ParseEachKind) {
  EXPECT_EQ(parse_source_spec("noise"), SourceSpec{});
  EXPECT_EQ(parse_source_spec("image:a b.png"), image_file("a b.png"));
  EXPECT_EQ(parse_source_spec("image:dir/x:1.png"), image_file("dir/x:1.png")) << "a path may hold ':'";
  EXPECT_EQ(parse_source_spec("video:/x/clip.mp4"), video_file("/x/clip.mp4"));
  EXPECT_EQ(parse_source_spec("webcam"), webcam(0));
  EXPECT_EQ(parse_source_spec("webcam:0"), webcam(0));
  EXPECT_EQ(parse_source_spec("webcam:12"), webcam(12));
}

TEST(SourceSpecs, MalformedSpecsNameTheFlag) {
  const auto error = [](const std::string& spec) { return test::error_of([&] { parse_source_spec(spec); }); };
  EXPECT_EQ(error("noisy"), "flag '--source': expected noise, image:PATH, video:PATH, webcam or webcam:N, got 'noisy'");
  EXPECT_EQ(error("noise:1"), "flag '--source': expected noise, image:PATH, video:PATH, webcam or webcam:N, got 'noise:1'");
  EXPECT_EQ(error("image:"), "flag '--source': expected image:PATH, got 'image:'");
  EXPECT_EQ(error("video"), "flag '--source': expected video:PATH, got 'video'");
  EXPECT_EQ(error("webcam:x"), "flag '--source': expected webcam:N with N a device number, e.g. webcam:0, got 'webcam:x'");
  EXPECT_EQ(error("webcam:"), "flag '--source': expected webcam:N with N a device number, e.g. webcam:0, got 'webcam:'");
  EXPECT_EQ(error("webcam:-1"), "flag '--source': expected webcam:N with N a device number, e.g. webcam:0, got 'webcam:-1'");
  EXPECT_EQ(error("bad\n"), "flag '--source': expected noise, image:PATH, video:PATH, webcam or webcam:N, got 'bad\\n'")
      << "escaped, on one line";
}

TEST_F(SourceTest, MissingFilesAndDevicesAreOneLineErrors) {
  EXPECT_EQ(error_of(image_file(path("none.png"))), path("none.png") + ": no such image file");
  // The GUI's path box, left empty.
  EXPECT_EQ(error_of(image_file("")), "image source: no file given (expected a path)");
  EXPECT_EQ(error_of(video_file("")), "video source: no file given (expected a path)");
  std::ofstream(path("text.txt")) << "not an image";
  EXPECT_NE(error_of(image_file(path("text.txt"))).find(path("text.txt") + ": not "), std::string::npos);
#if RTVD_HAS_OPENCV
  EXPECT_EQ(error_of(video_file("/nonexistent.mp4")), "/nonexistent.mp4: no such video file");
  EXPECT_EQ(error_of(webcam(99)), "no webcam at /dev/video99");
  std::ofstream(path("garbage.mp4")) << std::string(4000, 'x');
  EXPECT_NE(error_of(video_file(path("garbage.mp4"))).find(path("garbage.mp4") + ": cannot open as a video"),
            std::string::npos);
#else
  EXPECT_EQ(error_of(video_file("/nonexistent.mp4")), "rtvd was built without OpenCV: video sources need it");
  EXPECT_EQ(error_of(webcam(0)), "rtvd was built without OpenCV: webcam sources need it");
#endif
}

TEST_F(SourceTest, VideoFramesInOrderThenEndThenRewind) {
  if (!video_recording_available() || !RTVD_HAS_OPENCV) GTEST_SKIP() << "no video recording, or no OpenCV to read it";
  // Flat colours survive H.264 within a few levels; each frame is told apart by its colour.
  const std::vector<ImageRgba8> frames = {solid(32, 32, 200, 40, 40), solid(32, 32, 40, 200, 40),
                                          solid(32, 32, 40, 40, 200), solid(32, 32, 220, 220, 40)};
  auto rec = open_recorder(path("clip.mp4"), 32, 32, 10.0);
  for (const auto& f : frames) rec->write(f);
  rec->finish();

  auto s = open_source(video_file(path("clip.mp4")));
  EXPECT_EQ(s->frame_count(), 4);
  EXPECT_EQ(s->describe(), "video " + path("clip.mp4") + " (32x32, 4 frames, 10 fps)");
  EXPECT_EQ(s->file(), path("clip.mp4"));
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
  std::vector<uint8_t> rgb8;  // the next frame in 8-bit RGB
  ASSERT_TRUE(s->next(16, 8, rgb8));
  ASSERT_EQ(rgb8.size(), 16u * 8 * 3);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(rgb8[c], frames[2].pixels[c], 10) << "channel " << c;
}

#if RTVD_TEST_HAS_OPENCV
// The reference: the largest centred region of the frame's aspect ratio, cut and resized by OpenCV (area
// averaging to shrink, bilinear to grow, as image_ops.h promises), in float so nothing is rounded.
std::vector<float> opencv_crop_resize(const cv::Mat& rgb8, int width, int height) {
  // The crop's side rounded from the exact quotient (an aspect ratio rounded first turns 297 / 22 = 13.5 into
  // 13.4999...), at least a pixel, as center_crop.
  int cw = rgb8.cols, ch = rgb8.rows;
  if (int64_t(cw) * height > int64_t(ch) * width) cw = std::max(1, int(std::lround(double(ch) * width / height)));
  else ch = std::max(1, int(std::lround(double(cw) * height / width)));
  cv::Mat region, across, resized;
  rgb8(cv::Rect((rgb8.cols - cw) / 2, (rgb8.rows - ch) / 2, cw, ch)).convertTo(region, CV_32FC3);
  // Each axis on its own, as image_ops.h says: area where it shrinks, bilinear where it grows. Where both axes
  // go the same way that is one resize; where one shrinks and the other does not (e.g. 32x24 -> 3x22), one axis
  // at a time.
  const auto interpolation = [](int to, int from) { return to < from ? cv::INTER_AREA : cv::INTER_LINEAR; };
  if ((width < cw) == (height < ch)) {
    cv::resize(region, resized, cv::Size(width, height), 0, 0, interpolation(width, cw));
  } else {
    cv::resize(region, across, cv::Size(width, ch), 0, 0, interpolation(width, cw));
    cv::resize(across, resized, cv::Size(width, height), 0, 0, interpolation(height, ch));
  }
  const cv::Mat flat = resized.reshape(1, 1);  // continuous, as cv::resize writes it
  std::vector<float> out(flat.begin<float>(), flat.end<float>());
  for (float& v : out) v = v / 127.5f - 1.0f;
  return out;
}

// Random pixels, a 4:3 or 3:4 image of random size; each frame size of one aspect ratio at a time.
TEST_F(SourceTest, ImagesAreCroppedToTheFrameAspectThenResizedLikeOpenCv) {
  SCOPED_TRACE(test::seed_trace(rng_));
  const int unit = rng_.integer(4, 24);
  const bool portrait = rng_.integer(0, 1);
  const int w = portrait ? 3 * unit : 4 * unit, h = portrait ? 4 * unit : 3 * unit;
  ImageRgba8 image{w, h, std::vector<uint8_t>(size_t(w) * h * 4)};
  for (auto& v : image.pixels) v = uint8_t(rng_.integer(0, 255));
  write_png(path("in.png"), image);
  cv::Mat rgb;
  cv::cvtColor(cv::Mat(h, w, CV_8UC4, image.pixels.data()), rgb, cv::COLOR_RGBA2RGB);

  auto s = open_source(image_file(path("in.png")));
  struct Size {
    int w, h;
  };
  const Size random{rng_.integer(1, 32), rng_.integer(1, 32)};
  for (const Size f :
       {Size{unit, unit}, Size{2 * unit + 3, 2 * unit + 3}, random, Size{3 * w, 3 * w}, Size{w + 8, h / 2}}) {
    SCOPED_TRACE(testing::Message() << w << "x" << h << " -> " << f.w << "x" << f.h);
    std::vector<float> got = test::poisoned(3);
    ASSERT_TRUE(s->next(f.w, f.h, got));
    EXPECT_LT(test::max_abs_diff(got, opencv_crop_resize(rgb, f.w, f.h)), 1e-4);
  }
}

// A 4:3 frame whose outer eighths are red and whose centre square is grey: a square frame holds no red.
TEST_F(SourceTest, FourThreeVideoIsCroppedNotStretched) {
  if (!have_ffmpeg()) GTEST_SKIP() << "ffmpeg is not installed";
  const std::string clip = path("bands.mp4");
  const std::string cmd = "ffmpeg -v error -y -f lavfi -i color=c=0x808080:size=64x48:rate=24 -vf "
                          "\"drawbox=x=0:y=0:w=8:h=48:c=red:t=fill,drawbox=x=56:y=0:w=8:h=48:c=red:t=fill\" "
                          "-frames:v 2 -pix_fmt yuv444p " + clip;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto s = open_source(video_file(clip));
  std::vector<float> rgb;
  ASSERT_TRUE(s->next(16, 16, rgb));
  for (size_t i = 0; i < rgb.size(); i += 3)
    ASSERT_NEAR(rgb[i] - rgb[i + 1], 0.0, 0.1) << "pixel " << i / 3 << " of 16x16 is red: the sides were kept";
}

// Frames of an ffmpeg-encoded 4:3 clip against OpenCV's decoding of the same frames, cropped and resized by
// OpenCV; and the clip's own rate and length.
TEST_F(SourceTest, VideoFramesAreCroppedLikeOpenCvAndKeepTheirRate) {
  if (!have_ffmpeg()) GTEST_SKIP() << "ffmpeg is not installed";
  SCOPED_TRACE(test::seed_trace(rng_));
  const std::string clip = path("clip43.mp4");
  ffmpeg_clip(clip, 64, 48, "30000/1001", 6);
  auto s = open_source(video_file(clip));
  EXPECT_NEAR(s->fps(), 30000.0 / 1001.0, 1e-3);
  EXPECT_EQ(s->frame_count(), 6);
  EXPECT_EQ(s->describe(), "video " + clip + " (64x48, 6 frames, 29.97 fps)");

  cv::VideoCapture reference(clip, cv::CAP_FFMPEG);
  ASSERT_TRUE(reference.isOpened());
  const int size = 4 * rng_.integer(2, 12);
  cv::Mat bgr, rgb;
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(testing::Message() << "frame " << i << " at " << size << "x" << size);
    ASSERT_TRUE(reference.read(bgr));
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    std::vector<float> got;
    ASSERT_TRUE(s->next(size, size, got));
    EXPECT_LT(test::max_abs_diff(got, opencv_crop_resize(rgb, size, size)), 1e-4);
  }
}
#endif

TEST_F(SourceTest, VideoRatesAsTheFileGivesThem) {
  if (!RTVD_HAS_OPENCV || !have_ffmpeg()) GTEST_SKIP() << "built without OpenCV (no video sources), or no ffmpeg";
  for (const auto& [rate, want] : std::vector<std::pair<std::string, double>>{{"25", 25.0}, {"24000/1001", 23.976}}) {
    SCOPED_TRACE(rate);
    const std::string clip = path("rate.mkv");
    ffmpeg_clip(clip, 32, 32, rate, 3);
    EXPECT_NEAR(open_source(video_file(clip))->fps(), want, 1e-3);
  }
}

// A damaged video through the binary: rtvd's one-line error is the only line on stderr, without FFmpeg's
// own log ("moov atom not found", "Invalid NAL unit size").
TEST_F(SourceTest, CorruptVideosGiveExactlyOneLineOnStderr) {
  if (!RTVD_HAS_OPENCV || !have_ffmpeg()) GTEST_SKIP() << "built without OpenCV (no video sources), or no ffmpeg";
  SCOPED_TRACE(test::seed_trace(rng_));
  // moov first (faststart), then every byte of mdat random: it opens, and no frame decodes.
  ffmpeg_clip(path("good.mp4"), 64, 48, "24", 12, "-movflags +faststart");
  std::ifstream in(path("good.mp4"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t mdat = bytes.find("mdat");
  ASSERT_NE(mdat, std::string::npos);
  std::string garbled = bytes;
  for (size_t i = mdat + 4; i < garbled.size(); ++i) garbled[i] = char(rng_.integer(0, 255));
  std::ofstream(path("garbled.mp4"), std::ios::binary) << garbled;
  // Its first bytes only: the header is there, the index (moov, at the end without faststart) is not.
  ffmpeg_clip(path("whole.mp4"), 64, 48, "24", 12);
  std::ifstream whole(path("whole.mp4"), std::ios::binary);
  std::string head(2000, '\0');
  whole.read(head.data(), std::streamsize(head.size()));
  std::ofstream(path("truncated.mp4"), std::ios::binary) << head;

  for (const auto& [name, message] : std::vector<std::pair<std::string, std::string>>{
           {"garbled.mp4", "video has no decodable frame"}, {"truncated.mp4", "cannot open as a video"}}) {
    SCOPED_TRACE(name);
    fs::create_directory(dir_ / ("logs_" + name));
    const test::RunResult r = test::run_program(
        test::rtvd_binary(),
        {"render", "--device", "cpu", "--frames", "1", "--source", "video:" + path(name), "-o", path("out.mp4")},
        test::environment({"OPENCV_FFMPEG_LOGLEVEL", "OPENCV_FFMPEG_DEBUG"}), dir_ / ("logs_" + name), 120);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(path(name) + ": " + message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace rtvd
