// resize_to_rgb_float against the definition computed the slow way: every output pixel as a weighted sum
// over every source pixel, with the weights written as the formulas of image_ops.h; center_crop against
// what it promises (the frame's aspect ratio to the pixel, one full side, centred). source_test.cpp checks
// the two together against OpenCV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "base/error.h"
#include "pipeline/io/image_ops.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

// Weight of source index i in output index o along an axis of src -> dst pixels.
double axis_weight(int src, int dst, int o, int i) {
  if (dst == src) return o == i ? 1.0 : 0.0;
  const double scale = double(src) / dst;
  if (dst < src) {  // area: overlap of [o*scale, (o+1)*scale) with [i, i+1), as a share of the span
    const double overlap = std::min((o + 1) * scale, i + 1.0) - std::max(o * scale, double(i));
    return std::max(0.0, overlap) / scale;
  }
  // bilinear: a tent around the source position of the output centre, clamped to the edge centres
  const double c = std::clamp((o + 0.5) * scale - 0.5, 0.0, double(src - 1));
  return std::max(0.0, 1.0 - std::abs(c - i));
}

std::vector<float> naive_resize(const std::vector<uint8_t>& data, int w, int h, int channels, size_t row_bytes,
                                int out_w, int out_h) {
  std::vector<float> out(size_t(out_w) * out_h * 3);
  for (int y = 0; y < out_h; ++y)
    for (int x = 0; x < out_w; ++x)
      for (int c = 0; c < 3; ++c) {
        double sum = 0;
        for (int j = 0; j < h; ++j)
          for (int i = 0; i < w; ++i)
            sum += axis_weight(w, out_w, x, i) * axis_weight(h, out_h, y, j) * data[j * row_bytes + i * channels + c];
        out[(size_t(y) * out_w + x) * 3 + c] = float(sum / 127.5 - 1.0);
      }
  return out;
}

struct Source {
  std::vector<uint8_t> data;
  PixelView view;
};

// Random pixels, with padding after each row so that row_bytes is honoured.
Source random_source(test::Rng& rng, int w, int h, int channels) {
  Source s;
  const size_t row_bytes = size_t(w) * channels + size_t(rng.integer(0, 5));
  s.data.resize(row_bytes * h);
  for (auto& v : s.data) v = uint8_t(rng.integer(0, 255));
  s.view = PixelView{s.data.data(), w, h, channels, row_bytes};
  return s;
}

TEST(ImageOps, MatchesTheNaiveDefinitionShrinkingGrowingAndMixed) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  struct Case {
    int w, h, out_w, out_h;
  };
  const std::vector<Case> cases = {
      {16, 12, 8, 6},    // exact halving
      {17, 13, 5, 4},    // shrink by a fraction
      {5, 3, 16, 11},    // grow
      {21, 4, 6, 9},     // shrink x, grow y
      {7, 7, 7, 7},      // copy
      {1, 1, 4, 3},      // one pixel everywhere
      {9, 1, 2, 5},      // one row
      {rng.integer(1, 40), rng.integer(1, 40), rng.integer(1, 40), rng.integer(1, 40)},
  };
  for (const Case& c : cases) {
    for (const int channels : {3, 4}) {
      SCOPED_TRACE(testing::Message() << c.w << "x" << c.h << "x" << channels << " -> " << c.out_w << "x" << c.out_h);
      const Source s = random_source(rng, c.w, c.h, channels);
      std::vector<float> got = test::poisoned(7);
      resize_to_rgb_float(s.view, c.out_w, c.out_h, got);
      const std::vector<float> want = naive_resize(s.data, c.w, c.h, channels, s.view.row_bytes, c.out_w, c.out_h);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_LT(test::max_abs_diff(got, want), 1e-5);
    }
  }
}

TEST(ImageOps, HalvingAveragesEachTwoByTwoBlockAndCopyMapsTo127_5) {
  const std::vector<uint8_t> px = {0, 0, 0, 255, 255, 255,  //
                                   100, 100, 100, 45, 45, 45};
  const PixelView view{px.data(), 2, 2, 3, 6};
  std::vector<float> out;
  resize_to_rgb_float(view, 1, 1, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FLOAT_EQ(out[0], 100.0f / 127.5f - 1.0f);  // (0 + 255 + 100 + 45) / 4 = 100
  resize_to_rgb_float(view, 2, 2, out);
  EXPECT_FLOAT_EQ(out[0], -1.0f);
  EXPECT_FLOAT_EQ(out[3], 1.0f);
}

TEST(ImageOps, ConstantImagesStayConstantAtEverySize) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const uint8_t v = uint8_t(rng.integer(0, 255));
  const int w = rng.integer(1, 50), h = rng.integer(1, 50);
  const std::vector<uint8_t> px(size_t(w) * h * 4, v);
  std::vector<float> out;
  resize_to_rgb_float(PixelView{px.data(), w, h, 4, size_t(w) * 4}, rng.integer(1, 90), rng.integer(1, 90), out);
  for (float x : out) ASSERT_NEAR(x, v / 127.5 - 1.0, 1e-5);
}

// The 8-bit output is the float output's byte, rounded: within half a step of it after resampling, and the
// same value where the size is equal (no resampling), so that an 8-bit source gives the float source's image.
TEST(ImageOps, Rgb8IsTheFloatOutputRoundedToTheNearestByte) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int round = 0; round < 20; ++round) {
    const int w = rng.integer(1, 40), h = rng.integer(1, 40), channels = rng.integer(3, 4);
    std::vector<uint8_t> px(size_t(w) * h * channels);
    for (uint8_t& v : px) v = uint8_t(rng.integer(0, 255));
    const PixelView view{px.data(), w, h, channels, size_t(w) * channels};
    const bool same_size = round % 4 == 0;
    const int out_w = same_size ? w : rng.integer(1, 60), out_h = same_size ? h : rng.integer(1, 60);
    std::vector<float> floats;
    std::vector<uint8_t> bytes = {1, 2, 3};  // stale contents are replaced
    resize_to_rgb_float(view, out_w, out_h, floats);
    resize_to_rgb8(view, out_w, out_h, bytes);
    ASSERT_EQ(bytes.size(), floats.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (same_size) ASSERT_EQ(float(bytes[i]) / 127.5f - 1.0f, floats[i]) << i;
      else ASSERT_NEAR((floats[i] + 1.0) * 127.5, bytes[i], 0.5 + 1e-3) << i;
    }
  }
}

TEST(ImageOps, CenterCropIsTheCentredRegionOfTheFrameAspectRatio) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int i = 0; i < 500; ++i) {
    const int w = rng.integer(1, 400), h = rng.integer(1, 400);
    const int out_w = rng.integer(1, 300), out_h = rng.integer(1, 300);
    SCOPED_TRACE(testing::Message() << w << "x" << h << " for " << out_w << "x" << out_h);
    const Source s = random_source(rng, w, h, rng.integer(3, 4));
    const PixelView c = center_crop(s.view, out_w, out_h);
    ASSERT_EQ(c.channels, s.view.channels);
    ASSERT_EQ(c.row_bytes, s.view.row_bytes);
    // One side whole; the other the nearest whole number of pixels to the frame's aspect ratio (at least 1).
    const double want_w = double(h) * out_w / out_h, want_h = double(w) * out_h / out_w;
    if (want_w <= w) {
      ASSERT_EQ(c.height, h);
      ASSERT_LE(std::abs(c.width - std::max(want_w, 1.0)), 0.5) << "width " << c.width;
    } else {
      ASSERT_EQ(c.width, w);
      ASSERT_LE(std::abs(c.height - std::max(want_h, 1.0)), 0.5) << "height " << c.height;
    }
    // Centred: equal margins, or the odd pixel on the right / bottom.
    const ptrdiff_t offset = c.data - s.view.data;
    const int y0 = int(size_t(offset) / s.view.row_bytes), x0 = int(size_t(offset) % s.view.row_bytes) / c.channels;
    ASSERT_EQ(size_t(offset) % s.view.row_bytes % size_t(c.channels), 0u);
    ASSERT_EQ(x0, (w - c.width) / 2);
    ASSERT_EQ(y0, (h - c.height) / 2);
  }
}

TEST(ImageOps, CenterCropOfTheSameAspectIsTheWholeImage) {
  const std::vector<uint8_t> px(8 * 6 * 3, 7);
  const PixelView view{px.data(), 8, 6, 3, 8 * 3};
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{8, 6}, {4, 3}, {16, 12}, {64, 48}}) {
    const PixelView c = center_crop(view, w, h);
    EXPECT_EQ(c.data, view.data);
    EXPECT_EQ(c.width, 8);
    EXPECT_EQ(c.height, 6);
  }
}

TEST(ImageOps, BadArgumentsAreErrors) {
  const std::vector<uint8_t> px(16);
  std::vector<float> out;
  EXPECT_THROW(resize_to_rgb_float(PixelView{px.data(), 2, 2, 2, 4}, 1, 1, out), Error);  // 2 channels
  EXPECT_THROW(resize_to_rgb_float(PixelView{px.data(), 2, 2, 4, 4}, 1, 1, out), Error);  // rows too short
  EXPECT_THROW(resize_to_rgb_float(PixelView{px.data(), 2, 2, 4, 8}, 0, 1, out), Error);
  EXPECT_EQ(test::error_of([&] { center_crop(PixelView{px.data(), 2, 2, 4, 8}, 3, 0); }),
            "crop: target size must be positive, got 3x0");
  EXPECT_THROW(center_crop(PixelView{nullptr, 2, 2, 4, 8}, 1, 1), Error);
}

}  // namespace
}  // namespace rtvd
