// png.cpp against itself (round trips), against independent encoders (FFmpeg's, OpenCV's) and against
// damaged files.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "build_config.h"
#include "kernels/common/error.h"
#include "pipeline/io/png.h"
#include "support/test_util.h"

#if RTVD_HAS_OPENCV && __has_include(<opencv2/imgcodecs.hpp>)
#define RTVD_TEST_HAS_IMWRITE 1
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#else
#define RTVD_TEST_HAS_IMWRITE 0
#endif

namespace rtvd {
namespace {

namespace fs = std::filesystem;

class PngTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return temp_.path(name); }

  test::TempDir temp_{"rtvd_png_test"};
  const fs::path& dir_ = temp_.dir();
  test::Rng rng_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// The message of the Error f throws, or "" (a failure) when it throws none.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an rtvd::Error";
  return "";
}

ImageRgba8 random_image(test::Rng& rng, int width, int height) {
  ImageRgba8 image{width, height, std::vector<uint8_t>(size_t(width) * height * 4)};
  for (auto& v : image.pixels) v = uint8_t(rng.integer(0, 255));
  return image;
}

// Smooth ramps with a little noise: rows where Sub, Up, Average and Paeth beat no filter.
ImageRgba8 smooth_image(test::Rng& rng, int width, int height) {
  ImageRgba8 image{width, height, std::vector<uint8_t>(size_t(width) * height * 4)};
  const int phase = rng.integer(0, 255);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 4; ++c)
        image.pixels[(size_t(y) * width + x) * 4 + c] = uint8_t(phase + x * (c + 1) + y * (3 - c) + rng.integer(0, 2));
  return image;
}

void expect_same(const ImageRgba8& got, const ImageRgba8& want) {
  ASSERT_EQ(got.width, want.width);
  ASSERT_EQ(got.height, want.height);
  ASSERT_EQ(got.pixels.size(), want.pixels.size());
  for (size_t i = 0; i < want.pixels.size(); ++i)
    ASSERT_EQ(int(got.pixels[i]), int(want.pixels[i])) << "byte " << i << " (pixel " << i / 4 << ")";
}

// A PNG assembled chunk by chunk, for the features no encoder at hand writes (palette + tRNS) and for
// headers no encoder would write (16-bit, interlaced).
struct ChunkWriter {
  std::vector<uint8_t> bytes = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  void chunk(const std::string& type, const std::vector<uint8_t>& data) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(uint8_t(data.size() >> s));
    const size_t at = bytes.size();
    bytes.insert(bytes.end(), type.begin(), type.end());
    bytes.insert(bytes.end(), data.begin(), data.end());
    const uint32_t crc = uint32_t(crc32(0, &bytes[at], uInt(4 + data.size())));
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(uint8_t(crc >> s));
  }
  void header(uint32_t w, uint32_t h, uint8_t depth, uint8_t color, uint8_t interlace = 0) {
    chunk("IHDR", {uint8_t(w >> 24), uint8_t(w >> 16), uint8_t(w >> 8), uint8_t(w), uint8_t(h >> 24),
                   uint8_t(h >> 16), uint8_t(h >> 8), uint8_t(h), depth, color, 0, 0, interlace});
  }
  void image_data(const std::vector<uint8_t>& filtered_rows) {
    uLongf size = compressBound(uLong(filtered_rows.size()));
    std::vector<uint8_t> z(size);
    compress(z.data(), &size, filtered_rows.data(), uLong(filtered_rows.size()));
    z.resize(size);
    chunk("IDAT", z);
  }
};

TEST_F(PngTest, RoundTripsRandomAndSmoothImagesOfOddSizes) {
  SCOPED_TRACE(test::seed_trace(rng_));
  for (int i = 0; i < 12; ++i) {
    const int w = 2 * rng_.integer(0, 40) + 1, h = 2 * rng_.integer(0, 30) + 1;
    SCOPED_TRACE(testing::Message() << w << "x" << h);
    const ImageRgba8 image = i % 2 ? random_image(rng_, w, h) : smooth_image(rng_, w, h);
    write_png(file("x.png"), image);
    expect_same(read_png(file("x.png")), image);
  }
}

TEST_F(PngTest, RowFiltersShrinkSmoothImages) {
  SCOPED_TRACE(test::seed_trace(rng_));
  const ImageRgba8 image = smooth_image(rng_, 97, 61);
  write_png(file("s.png"), image);
  // The same rows all with filter 0, deflated at the fastest level like the writer's.
  std::vector<uint8_t> unfiltered;
  for (int y = 0; y < image.height; ++y) {
    unfiltered.push_back(0);
    const auto row = image.pixels.begin() + long(y) * image.width * 4;
    unfiltered.insert(unfiltered.end(), row, row + image.width * 4);
  }
  uLongf size = compressBound(uLong(unfiltered.size()));
  std::vector<uint8_t> z(size);
  ASSERT_EQ(compress2(z.data(), &size, unfiltered.data(), uLong(unfiltered.size()), Z_BEST_SPEED), Z_OK);
  EXPECT_LT(fs::file_size(file("s.png")), size * 7 / 10) << "filter 0 gives " << size << " bytes";
}

// FFmpeg's PNG encoder, with each of its row predictors: none, sub, up, avg, paeth and a per-row mix.
TEST_F(PngTest, ReadsFfmpegPngsWithEveryFilterType) {
  if (std::system("ffmpeg -version > /dev/null 2>&1") != 0) GTEST_SKIP() << "ffmpeg is not installed";
  SCOPED_TRACE(test::seed_trace(rng_));
  struct Format {
    const char* pix_fmt;
    int channels;
  };
  const std::vector<std::string> predictors = {"none", "sub", "up", "avg", "paeth", "mixed"};
  for (const Format f : {Format{"gray", 1}, Format{"ya8", 2}, Format{"rgb24", 3}, Format{"rgba", 4}}) {
    SCOPED_TRACE(f.pix_fmt);
    const int w = 2 * rng_.integer(1, 20) + 1, h = 2 * rng_.integer(1, 12) + 1;
    const ImageRgba8 rgba = smooth_image(rng_, w, h);
    std::vector<uint8_t> raw;
    for (size_t p = 0; p < rgba.pixels.size(); p += 4)
      for (int c = 0; c < f.channels; ++c) raw.push_back(rgba.pixels[p + c]);
    write_bytes(file("in.raw"), raw);
    // One input, one output per predictor.
    std::string cmd = std::string("ffmpeg -v error -y -f rawvideo -pix_fmt ") + f.pix_fmt + " -s " +
                      std::to_string(w) + "x" + std::to_string(h) + " -i " + file("in.raw");
    for (const auto& pred : predictors) cmd += " -pred " + pred + " " + file(pred + ".png");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

    ImageRgba8 want = rgba;
    for (size_t p = 0; p < want.pixels.size(); p += 4) {
      uint8_t* px = &want.pixels[p];
      if (f.channels <= 2) px[1] = px[2] = px[0];
      if (f.channels == 2) px[3] = rgba.pixels[p + 1];
      if (f.channels == 1 || f.channels == 3) px[3] = 255;
    }
    for (const auto& pred : predictors) {
      SCOPED_TRACE("-pred " + pred);
      expect_same(read_png(file(pred + ".png")), want);
    }
  }
}

TEST_F(PngTest, ReadsOpenCvPngsInGreyRgbAndRgba) {
#if RTVD_TEST_HAS_IMWRITE
  SCOPED_TRACE(test::seed_trace(rng_));
  const int w = 2 * rng_.integer(1, 30) + 1, h = 2 * rng_.integer(1, 20) + 1;
  const ImageRgba8 rgba = smooth_image(rng_, w, h);
  const cv::Mat rgba_mat(h, w, CV_8UC4, const_cast<uint8_t*>(rgba.pixels.data()));
  struct Case {
    const char* name;
    int conversion;  // from RGBA to what imwrite expects (BGR order)
  };
  for (const Case c : {Case{"grey", cv::COLOR_RGBA2GRAY}, Case{"rgb", cv::COLOR_RGBA2BGR},
                       Case{"rgba", cv::COLOR_RGBA2BGRA}}) {
    SCOPED_TRACE(c.name);
    cv::Mat written;
    cv::cvtColor(rgba_mat, written, c.conversion);
    ASSERT_TRUE(cv::imwrite(file("cv.png"), written));
    const ImageRgba8 got = read_png(file("cv.png"));
    ASSERT_EQ(got.width, w);
    ASSERT_EQ(got.height, h);
    for (int i = 0; i < w * h; ++i) {
      const uint8_t* p = &got.pixels[size_t(i) * 4];
      const uint8_t* s = written.ptr<uint8_t>() + size_t(i) * written.channels();
      if (written.channels() == 1) {
        ASSERT_EQ(int(p[0]), int(s[0])) << "pixel " << i;
        ASSERT_TRUE(p[1] == s[0] && p[2] == s[0] && p[3] == 255) << "pixel " << i;
      } else {
        ASSERT_TRUE(p[0] == s[2] && p[1] == s[1] && p[2] == s[0]) << "pixel " << i;
        ASSERT_EQ(int(p[3]), written.channels() == 4 ? int(s[3]) : 255) << "pixel " << i;
      }
    }
  }
#else
  GTEST_SKIP() << "OpenCV's headers are not on the tests' include path (or rtvd is built without OpenCV)";
#endif
}

TEST_F(PngTest, ReadsPaletteWithTransparency) {
  ChunkWriter png;
  png.header(3, 2, 8, 3);
  png.chunk("PLTE", {255, 0, 0, 0, 255, 0, 0, 0, 255});
  png.chunk("tRNS", {128});  // entry 0 half transparent; entries 1 and 2 opaque
  png.chunk("tEXt", {'a', 0, 'b'});  // ancillary: skipped
  png.image_data({0, 0, 1, 2, /* row 2, Up filter */ 2, 2, 1, 254});  // row 2 = {2, 2, 0}
  png.chunk("IEND", {});
  write_bytes(file("p.png"), png.bytes);
  const ImageRgba8 want{3, 2, {255, 0, 0, 128, 0, 255, 0, 255, 0, 0, 255, 255,
                               0, 0, 255, 255, 0, 0, 255, 255, 255, 0, 0, 128}};
  expect_same(read_png(file("p.png")), want);
}

TEST_F(PngTest, CorruptCrcIsAnErrorNamingTheFile) {
  SCOPED_TRACE(test::seed_trace(rng_));
  write_png(file("c.png"), random_image(rng_, 9, 7));
  std::vector<uint8_t> bytes = read_bytes(file("c.png"));
  bytes[8 + 8 + 13 + 4 + 8 + 3] ^= 0x10;  // a byte inside IDAT's data (after the signature and IHDR)
  write_bytes(file("c.png"), bytes);
  const std::string e = error_of([&] { read_png(file("c.png")); });
  EXPECT_NE(e.find(file("c.png")), std::string::npos) << e;
  EXPECT_NE(e.find("CRC mismatch in chunk 'IDAT'"), std::string::npos) << e;
}

TEST_F(PngTest, TruncatedFilesAreErrorsNamingTheFile) {
  SCOPED_TRACE(test::seed_trace(rng_));
  write_png(file("t.png"), random_image(rng_, 11, 5));
  const std::vector<uint8_t> whole = read_bytes(file("t.png"));
  // Inside the signature, inside IHDR, inside IDAT, just before IEND, one byte short.
  for (const size_t keep : {size_t(5), size_t(20), whole.size() / 2, whole.size() - 12, whole.size() - 1}) {
    SCOPED_TRACE(testing::Message() << "first " << keep << " of " << whole.size() << " bytes");
    write_bytes(file("t.png"), std::vector<uint8_t>(whole.begin(), whole.begin() + long(keep)));
    const std::string e = error_of([&] { read_png(file("t.png")); });
    EXPECT_NE(e.find(file("t.png")), std::string::npos) << e;
    EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("not a PNG") != std::string::npos) << e;
  }
}

TEST_F(PngTest, UnsupportedFormatsAreClearErrors) {
  struct Case {
    uint8_t depth, color, interlace;
    const char* message;
  };
  for (const Case c : {Case{16, 6, 0, "bit depth 16"}, Case{4, 3, 0, "bit depth 4"},
                       Case{8, 2, 1, "interlaced"}, Case{8, 5, 0, "color type 5"}}) {
    SCOPED_TRACE(c.message);
    ChunkWriter png;
    png.header(4, 4, c.depth, c.color, c.interlace);
    png.image_data(std::vector<uint8_t>(4 * (1 + 4 * 8), 0));
    png.chunk("IEND", {});
    write_bytes(file("u.png"), png.bytes);
    const std::string e = error_of([&] { read_png(file("u.png")); });
    EXPECT_NE(e.find(file("u.png")), std::string::npos) << e;
    EXPECT_NE(e.find(c.message), std::string::npos) << e;
  }
}

TEST_F(PngTest, BadFilterTypeAndShortDataAreErrors) {
  ChunkWriter bad_filter;
  bad_filter.header(2, 2, 8, 0);
  bad_filter.image_data({0, 1, 2, 5, 3, 4});
  bad_filter.chunk("IEND", {});
  write_bytes(file("f.png"), bad_filter.bytes);
  EXPECT_NE(error_of([&] { read_png(file("f.png")); }).find("filter type 5 in row 1"), std::string::npos);

  ChunkWriter short_data;
  short_data.header(2, 2, 8, 0);
  short_data.image_data({0, 1, 2});
  short_data.chunk("IEND", {});
  write_bytes(file("d.png"), short_data.bytes);
  EXPECT_NE(error_of([&] { read_png(file("d.png")); }).find("image data is 3 bytes, expected 6"), std::string::npos);
}

TEST_F(PngTest, MissingFileAndNonPngAreErrors) {
  EXPECT_NE(error_of([&] { read_png(file("none.png")); }).find(file("none.png") + ": cannot open"),
            std::string::npos);
  write_bytes(file("text.png"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  EXPECT_NE(error_of([&] { read_png(file("text.png")); }).find("not a PNG"), std::string::npos);
}

TEST_F(PngTest, WriteChecksTheImageAndThePath) {
  const ImageRgba8 wrong_size{4, 4, std::vector<uint8_t>(4 * 4 * 3)};
  EXPECT_NE(error_of([&] { write_png(file("w.png"), wrong_size); }).find("expected 64"), std::string::npos);
  EXPECT_FALSE(fs::exists(file("w.png")));
  const ImageRgba8 ok{1, 1, {1, 2, 3, 4}};
  EXPECT_NE(error_of([&] { write_png(file("no/such/dir/w.png"), ok); }).find("cannot write"), std::string::npos);
}

}  // namespace
}  // namespace rtvd
