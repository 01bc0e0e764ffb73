// png.cpp against itself (round trips), against independent encoders (FFmpeg's, OpenCV's, and one written
// here from the standard for the bit depths and interlacing no encoder at hand writes) and against damaged
// files.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
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

// A PNG assembled chunk by chunk, for the features no encoder at hand writes (palette + tRNS, depths below
// 8, Adam7) and for headers no encoder would write.
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

// A 16-bit sample as 8 bits, rounded to nearest: round(v * 255 / 65535) = round(v / 257).
int rounded_8bit(int v16) { return int(std::lround(v16 / 257.0)); }

// Random 16-bit samples, the first ones at the edges and on both sides of each rounding boundary.
std::vector<uint16_t> random_samples16(test::Rng& rng, size_t n) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = uint16_t(rng.integer(0, 65535));
  const std::vector<uint16_t> edges = {0, 65535, 128, 129, 257 * 100 + 128, 257 * 100 + 129, 65535 - 128, 65535 - 129};
  for (size_t i = 0; i < edges.size() && i < n; ++i) v[i] = edges[i];
  return v;
}

// 16-bit PNGs from OpenCV (what ImageMagick writes by default, and OpenCV writes for CV_16U). The reference
// is OpenCV's own decoding of the same file, scaled to 8 bits by OpenCV, and the samples written.
TEST_F(PngTest, Reads16BitOpenCvPngsRoundedTo8Bits) {
#if RTVD_TEST_HAS_IMWRITE
  SCOPED_TRACE(test::seed_trace(rng_));
  for (const int channels : {1, 3, 4}) {
    SCOPED_TRACE(testing::Message() << channels << " channels");
    const int w = rng_.integer(3, 40), h = rng_.integer(1, 30);
    const std::vector<uint16_t> samples = random_samples16(rng_, size_t(w) * h * channels);
    const cv::Mat written(h, w, CV_16UC(channels), const_cast<uint16_t*>(samples.data()));
    ASSERT_TRUE(cv::imwrite(file("16.png"), written));
    const cv::Mat decoded = cv::imread(file("16.png"), cv::IMREAD_UNCHANGED);
    ASSERT_EQ(decoded.type(), CV_16UC(channels)) << "OpenCV did not write a 16-bit PNG";
    cv::Mat want;
    decoded.convertTo(want, CV_8U, 1.0 / 257.0);
    const ImageRgba8 got = read_png(file("16.png"));
    ASSERT_EQ(got.width, w);
    ASSERT_EQ(got.height, h);
    for (int i = 0; i < w * h; ++i) {
      const uint8_t* p = &got.pixels[size_t(i) * 4];
      const uint8_t* cv8 = want.ptr<uint8_t>() + size_t(i) * channels;
      const uint16_t* s16 = &samples[size_t(i) * channels];
      // OpenCV's order is BGR(A): RGBA channel c is OpenCV's bgr[c].
      const int bgr[4] = {channels == 1 ? 0 : 2, channels == 1 ? 0 : 1, 0, 3};
      for (int c = 0; c < (channels == 4 ? 4 : 3); ++c) {
        ASSERT_EQ(int(p[c]), int(cv8[bgr[c]])) << "pixel " << i << " channel " << c << ", 16-bit " << s16[bgr[c]];
        ASSERT_EQ(int(p[c]), rounded_8bit(s16[bgr[c]])) << "pixel " << i << " channel " << c;
      }
      if (channels != 4) ASSERT_EQ(int(p[3]), 255) << "pixel " << i;
    }
  }
#else
  GTEST_SKIP() << "OpenCV's headers are not on the tests' include path (or rtvd is built without OpenCV)";
#endif
}

// FFmpeg's encoder in each 16-bit format it writes, grey+alpha included (OpenCV writes no 2-channel PNG).
TEST_F(PngTest, Reads16BitFfmpegPngsInEveryColorType) {
  if (std::system("ffmpeg -version > /dev/null 2>&1") != 0) GTEST_SKIP() << "ffmpeg is not installed";
  SCOPED_TRACE(test::seed_trace(rng_));
  struct Format {
    const char* pix_fmt;
    int channels;
  };
  for (const Format f : {Format{"gray16be", 1}, Format{"ya16be", 2}, Format{"rgb48be", 3}, Format{"rgba64be", 4}}) {
    SCOPED_TRACE(f.pix_fmt);
    const int w = rng_.integer(3, 40), h = rng_.integer(1, 30);
    const std::vector<uint16_t> samples = random_samples16(rng_, size_t(w) * h * f.channels);
    std::vector<uint8_t> raw;
    for (const uint16_t v : samples) raw.insert(raw.end(), {uint8_t(v >> 8), uint8_t(v)});
    write_bytes(file("in.raw"), raw);
    const std::string cmd = std::string("ffmpeg -v error -y -f rawvideo -pix_fmt ") + f.pix_fmt + " -s " +
                            std::to_string(w) + "x" + std::to_string(h) + " -i " + file("in.raw") + " " +
                            file("16.png");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::vector<uint8_t> png = read_bytes(file("16.png"));
    ASSERT_GT(png.size(), 25u);
    ASSERT_EQ(int(png[24]), 16) << "ffmpeg did not write a 16-bit PNG";

    const ImageRgba8 got = read_png(file("16.png"));
    ASSERT_EQ(got.width, w);
    ASSERT_EQ(got.height, h);
    for (int i = 0; i < w * h; ++i) {
      const uint16_t* s = &samples[size_t(i) * f.channels];
      const int grey = f.channels <= 2;
      const int want[4] = {rounded_8bit(s[0]), rounded_8bit(s[grey ? 0 : 1]), rounded_8bit(s[grey ? 0 : 2]),
                           f.channels % 2 == 0 ? rounded_8bit(s[f.channels - 1]) : 255};
      for (int c = 0; c < 4; ++c)
        ASSERT_EQ(int(got.pixels[size_t(i) * 4 + c]), want[c]) << "pixel " << i << " channel " << c;
    }
  }
}

// An image as PNG samples (any depth, any colour type) and an encoder for it written from the standard:
// samples packed from the most significant bit, each row filtered with a random one of None, Sub and Up,
// Adam7's passes when interlaced. Up on each pass's first row checks that a pass starts from a zero row.
struct Samples {
  int width = 0, height = 0, channels = 0, depth = 0;
  std::vector<uint16_t> v;  // (height, width, channels)
};

struct PassSpec {
  int x0, y0, dx, dy;
};
const std::vector<PassSpec> kPlain = {{0, 0, 1, 1}};
const std::vector<PassSpec> kAdam7 = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                      {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};

std::vector<uint8_t> pack(const std::vector<uint16_t>& samples, int depth) {
  std::vector<uint8_t> row((samples.size() * depth + 7) / 8, 0);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (depth == 16) {
      row[2 * i] = uint8_t(samples[i] >> 8), row[2 * i + 1] = uint8_t(samples[i]);
    } else {
      const size_t bit = i * depth;
      row[bit / 8] |= uint8_t(samples[i] << (8 - depth - bit % 8));
    }
  }
  return row;
}

std::vector<uint8_t> filtered_rows(test::Rng& rng, const Samples& s, bool interlaced) {
  std::vector<uint8_t> out;
  const size_t bpp = std::max(1, s.channels * s.depth / 8);
  for (const PassSpec& p : interlaced ? kAdam7 : kPlain) {
    std::vector<uint8_t> prev;
    for (int y = p.y0; y < s.height; y += p.dy) {
      std::vector<uint16_t> samples;
      for (int x = p.x0; x < s.width; x += p.dx)
        for (int c = 0; c < s.channels; ++c) samples.push_back(s.v[(size_t(y) * s.width + x) * s.channels + c]);
      if (samples.empty()) break;  // a pass without columns has no rows either
      const std::vector<uint8_t> row = pack(samples, s.depth);
      if (prev.empty()) prev.assign(row.size(), 0);
      const int filter = rng.integer(0, 2);
      out.push_back(uint8_t(filter));
      for (size_t i = 0; i < row.size(); ++i) {
        const int predictor = filter == 1 ? (i >= bpp ? row[i - bpp] : 0) : filter == 2 ? prev[i] : 0;
        out.push_back(uint8_t(row[i] - predictor));
      }
      prev = row;
    }
  }
  return out;
}

std::string write_samples(test::Rng& rng, const std::string& path, const Samples& s, uint8_t color, bool interlaced,
                          const std::vector<std::pair<std::string, std::vector<uint8_t>>>& chunks = {}) {
  ChunkWriter png;
  png.header(uint32_t(s.width), uint32_t(s.height), uint8_t(s.depth), color, interlaced ? 1 : 0);
  for (const auto& [type, data] : chunks) png.chunk(type, data);
  png.image_data(filtered_rows(rng, s, interlaced));
  png.chunk("IEND", {});
  write_bytes(path, png.bytes);
  return path;
}

Samples random_samples(test::Rng& rng, int channels, int depth, int max_value) {
  Samples s{rng.integer(1, 37), rng.integer(1, 23), channels, depth, {}};
  s.v.resize(size_t(s.width) * s.height * channels);
  for (auto& x : s.v) x = uint16_t(rng.integer(0, max_value));
  return s;
}

// Grey at 1, 2 and 4 bits scales exactly to 8 (x 255, 85, 17); a tRNS key is compared at the image's depth.
TEST_F(PngTest, ReadsLowDepthGreyWithTransparencyKey) {
  SCOPED_TRACE(test::seed_trace(rng_));
  for (const int depth : {1, 2, 4}) {
    for (const bool interlaced : {false, true}) {
      SCOPED_TRACE(testing::Message() << depth << "-bit, interlaced " << interlaced);
      const int max = (1 << depth) - 1, key = rng_.integer(0, max);
      const Samples s = random_samples(rng_, 1, depth, max);
      const ImageRgba8 got =
          read_png(write_samples(rng_, file("g.png"), s, 0, interlaced, {{"tRNS", {0, uint8_t(key)}}}));
      ASSERT_EQ(got.width, s.width);
      ASSERT_EQ(got.height, s.height);
      for (size_t i = 0; i < s.v.size(); ++i) {
        const int grey = int(std::lround(s.v[i] * 255.0 / max));
        const uint8_t* p = &got.pixels[i * 4];
        ASSERT_TRUE(p[0] == grey && p[1] == grey && p[2] == grey) << "pixel " << i << ": " << int(p[0]) << ", " << grey;
        ASSERT_EQ(int(p[3]), s.v[i] == key ? 0 : 255) << "pixel " << i;
      }
    }
  }
}

TEST_F(PngTest, ReadsPalettesAtEveryDepth) {
  SCOPED_TRACE(test::seed_trace(rng_));
  for (const int depth : {1, 2, 4, 8}) {
    SCOPED_TRACE(testing::Message() << depth << "-bit");
    const int entries = rng_.integer(1, 1 << depth), transparent = rng_.integer(0, entries);
    std::vector<uint8_t> plte, trns;
    for (int i = 0; i < entries * 3; ++i) plte.push_back(uint8_t(rng_.integer(0, 255)));
    for (int i = 0; i < transparent; ++i) trns.push_back(uint8_t(rng_.integer(0, 255)));
    const Samples s = random_samples(rng_, 1, depth, entries - 1);
    const ImageRgba8 got =
        read_png(write_samples(rng_, file("p.png"), s, 3, rng_.integer(0, 1), {{"PLTE", plte}, {"tRNS", trns}}));
    for (size_t i = 0; i < s.v.size(); ++i)
      for (int c = 0; c < 4; ++c) {
        const int want = c < 3 ? plte[s.v[i] * 3 + c] : s.v[i] < transparent ? trns[s.v[i]] : 255;
        ASSERT_EQ(int(got.pixels[i * 4 + c]), want) << "pixel " << i << " channel " << c;
      }
  }
}

// Adam7 at 8 and 16 bits, including sizes where some passes are empty (1x1, 3x2...).
TEST_F(PngTest, ReadsInterlacedImagesAtEveryColorTypeAnd8Or16Bits) {
  SCOPED_TRACE(test::seed_trace(rng_));
  struct Type {
    uint8_t color;
    int channels;
  };
  for (const Type t : {Type{0, 1}, Type{4, 2}, Type{2, 3}, Type{6, 4}})
    for (const int depth : {8, 16}) {
      Samples s = random_samples(rng_, t.channels, depth, (1 << depth) - 1);
      if (rng_.integer(0, 1)) {  // a size below 8x8 leaves some passes without pixels
        s.width = rng_.integer(1, 7), s.height = rng_.integer(1, 7);
        s.v.resize(size_t(s.width) * s.height * t.channels);
      }
      SCOPED_TRACE(testing::Message() << "color type " << int(t.color) << ", " << depth << "-bit, " << s.width << "x"
                                      << s.height);
      const ImageRgba8 got = read_png(write_samples(rng_, file("i.png"), s, t.color, true));
      ASSERT_EQ(got.width, s.width);
      ASSERT_EQ(got.height, s.height);
      const auto to8 = [&](uint16_t v) { return depth == 16 ? rounded_8bit(v) : int(v); };
      for (int i = 0; i < s.width * s.height; ++i) {
        const uint16_t* v = &s.v[size_t(i) * t.channels];
        const bool grey = t.channels <= 2;
        const int want[4] = {to8(v[0]), to8(v[grey ? 0 : 1]), to8(v[grey ? 0 : 2]),
                             t.channels % 2 == 0 ? to8(v[t.channels - 1]) : 255};
        for (int c = 0; c < 4; ++c)
          ASSERT_EQ(int(got.pixels[size_t(i) * 4 + c]), want[c]) << "pixel " << i << " channel " << c;
      }
    }
}

// A 16-bit key is compared before the 16 -> 8 rounding: a sample one step away keeps its opacity.
TEST_F(PngTest, SixteenBitTransparencyKeyIsExact) {
  SCOPED_TRACE(test::seed_trace(rng_));
  const uint16_t key = uint16_t(rng_.integer(1, 65534));
  const Samples s{3, 1, 1, 16, {key, uint16_t(key + 1), uint16_t(key - 1)}};
  const ImageRgba8 got =
      read_png(write_samples(rng_, file("k.png"), s, 0, false, {{"tRNS", {uint8_t(key >> 8), uint8_t(key)}}}));
  EXPECT_EQ(int(got.pixels[3]), 0);
  EXPECT_EQ(int(got.pixels[7]), 255);
  EXPECT_EQ(int(got.pixels[11]), 255);
}

TEST_F(PngTest, InvalidDepthsAndMethodsAreClearErrors) {
  struct Case {
    uint8_t depth, color, interlace;
    const char* message;
  };
  for (const Case c : {Case{16, 3, 0, "bit depth 16 is not valid for PNG color type 3"},
                       Case{4, 2, 0, "bit depth 4 is not valid for PNG color type 2"},
                       Case{1, 6, 0, "bit depth 1 is not valid for PNG color type 6"},
                       Case{12, 0, 0, "bit depth 12 is not valid"}, Case{8, 2, 2, "unknown interlace method 2"},
                       Case{8, 5, 0, "color type 5"}}) {
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

// Peak resident memory of this process, in bytes.
size_t peak_rss() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return size_t(usage.ru_maxrss) * 1024;
}

// A header promising the largest image allowed (2^28 RGBA pixels, a 1 GiB inflated buffer) over a few bytes
// of data: the error comes without the process growing towards that size.
TEST_F(PngTest, HugeHeaderOverLittleDataFailsWithoutAllocatingTheImage) {
  ChunkWriter png;
  png.header(16384, 16384, 8, 6);
  png.image_data(std::vector<uint8_t>(1000, 0));
  png.chunk("IEND", {});
  write_bytes(file("huge.png"), png.bytes);
  const size_t before = peak_rss();
  EXPECT_NE(error_of([&] { read_png(file("huge.png")); }).find(file("huge.png") + ": image data is 1000 bytes"),
            std::string::npos);
  EXPECT_LT(peak_rss() - before, size_t(64) << 20) << "peak memory grew by " << ((peak_rss() - before) >> 20) << " MiB";
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
