// canny on its case table (kernels/canny/canny_cases.h): the control image of ControlNet's canny preprocessor.
// Fresh random images every run (the seed is in the failure message): noise, soft-edged shapes over a ramp,
// flat blocks, at the case's thresholds and a random pair in either order; outputs poisoned with NaN, the
// workspace with junk.
//   CannyCpu (needs OpenCV): canny_cpu against cv::Canny on the same bytes, pixel for pixel in every channel;
//     sources off the byte grid and out of range round and clamp to the bytes cv::Canny gets; a long snake of
//     weak edge pixels hangs on one strong pixel; bad params are refused.
//   CannyCuda (CUDA builds, skipping without a device): canny against canny_cpu, exactly, twice, also on the
//     snake (the worst case of hysteresis: one component through the whole image).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/canny/canny.h"
#include "kernels/canny/canny_cases.h"
#include "kernels/cast/rgb8_to_float.h"
#include "support/test_util.h"
#if RTVD_HAS_OPENCV && __has_include(<opencv2/imgproc.hpp>)
#define RTVD_TEST_HAS_OPENCV 1
#include <opencv2/imgproc.hpp>
#else
#define RTVD_TEST_HAS_OPENCV 0
#endif
#if RTVD_HAS_CUDA
#include "kernels/canny/canny.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const CannyCase& c, std::ostream* os) { *os << c.name; }

namespace {

enum class Picture { Noise, SoftShapes, FlatBlocks };
const char* picture_name(Picture k) {
  return k == Picture::Noise ? "noise" : k == Picture::SoftShapes ? "soft shapes" : "flat blocks";
}

// An 8-bit image (n, h, w, c) of the kind asked for.
std::vector<uint8_t> draw(test::Rng& rng, const CannyCase& c, Picture kind) {
  std::vector<uint8_t> b(size_t(c.pixels()) * c.c);
  const auto byte = [](double v) { return uint8_t(std::clamp(std::lround(v), 0L, 255L)); };
  for (int img = 0; img < c.n; ++img) {
    uint8_t* out = b.data() + size_t(img) * c.h * c.w * c.c;
    if (kind == Picture::Noise) {
      for (size_t i = 0; i < size_t(c.h) * c.w * c.c; ++i) out[i] = uint8_t(rng.integer(0, 255));
      continue;
    }
    // Discs (soft shapes: edges ramped over up to 6 pixels, on a ramp, with a little noise) or rectangles (flat
    // blocks: hard edges on a flat background, no noise), each of a random colour.
    struct Shape { double cy, cx, ry, rx, soft; int colour[kCannyMaxChannels]; };
    std::vector<Shape> shapes(size_t(rng.integer(2, 6)));
    for (Shape& s : shapes) {
      s = {rng.uniform(0, float(c.h)), rng.uniform(0, float(c.w)), rng.uniform(1, 0.5f * float(c.h) + 2),
           rng.uniform(1, 0.5f * float(c.w) + 2), kind == Picture::SoftShapes ? rng.uniform(0.5f, 6.0f) : 0.0, {}};
      for (int& v : s.colour) v = rng.integer(0, 255);
    }
    const double base = rng.uniform(0, 255), slope_y = rng.uniform(-2, 2), slope_x = rng.uniform(-2, 2);
    for (int r = 0; r < c.h; ++r)
      for (int q = 0; q < c.w; ++q)
        for (int ch = 0; ch < c.c; ++ch) {
          double v = kind == Picture::SoftShapes ? base + slope_y * r + slope_x * q + 3 * rng.normal() : base;
          for (const Shape& s : shapes) {
            double inside;  // 1 inside, 0 outside, a ramp across soft edges
            if (kind == Picture::SoftShapes) {
              const double d = std::hypot((r - s.cy) / s.ry, (q - s.cx) / s.rx) - 1;  // in radii
              inside = std::clamp(0.5 - d * std::min(s.ry, s.rx) / s.soft, 0.0, 1.0);
            } else {
              inside = std::abs(r - s.cy) <= s.ry && std::abs(q - s.cx) <= s.rx ? 1 : 0;
            }
            v = v * (1 - inside) + s.colour[ch] * inside;
          }
          out[(size_t(r) * c.w + q) * c.c + ch] = byte(v);
        }
  }
  return b;
}

// The source as the engine holds it: rgb8_to_float's b / 127.5 - 1.
std::vector<float> to_source(const std::vector<uint8_t>& b) {
  std::vector<float> x(b.size());
  rgb8_to_float_cpu({.x = b.data(), .y = x.data(), .count = int64_t(b.size())});
  return x;
}

// The snake: a band of gray 100 on gray 60, winding through the image in rows of 3 pixels with 3 between (a
// boustrophedon), whose border gives a weak edge (low 100 < m <= high 600); a white square at its start gives
// the strong pixels at one end. Every channel alike.
CannyCase snake_case(int h, int w) {
  return {.name = "snake", .h = h, .w = w, .low = 100, .high = 600};
}
std::vector<uint8_t> draw_snake(const CannyCase& c) {
  std::vector<uint8_t> gray(size_t(c.h) * c.w, 60);
  const auto fill = [&](int r0, int r1, int q0, int q1, uint8_t v) {
    for (int r = std::max(r0, 0); r < std::min(r1, c.h); ++r)
      for (int q = std::max(q0, 0); q < std::min(q1, c.w); ++q) gray[size_t(r) * c.w + q] = v;
  };
  for (int k = 0, r = 3; r + 3 <= c.h - 3; ++k, r += 6) {
    fill(r, r + 3, 3, c.w - 3, 100);
    if (r + 9 <= c.h - 3) {  // the turn down to the next row, at the right end and the left by turns
      const int q = k % 2 == 0 ? c.w - 6 : 3;
      fill(r, r + 9, q, q + 3, 100);
    }
  }
  fill(3, 6, 3, 6, 255);
  std::vector<uint8_t> b(gray.size() * c.c);
  for (size_t i = 0; i < b.size(); ++i) b[i] = gray[i / c.c];
  return b;
}

std::vector<uint8_t> junk_workspace(const CannyParams& p) { return std::vector<uint8_t>(canny_workspace_bytes(p), 0xab); }

std::vector<float> run_cpu(const CannyCase& c, const std::vector<float>& x) {
  std::vector<float> y = test::poisoned(size_t(c.pixels()) * kCannyOutChannels);
  const int32_t thresholds[2] = {c.low, c.high};
  CannyParams p = canny_params(c, x.data(), thresholds, y.data(), nullptr);
  std::vector<uint8_t> ws = junk_workspace(p);
  p.workspace = ws.data();
  canny_cpu(p);
  return y;
}

// The edge pixels of y (every channel must say the same), and where it differs from expected (0/1 per pixel).
void expect_edges(const std::vector<float>& y, const std::vector<uint8_t>& expected, const std::string& what) {
  ASSERT_EQ(y.size(), expected.size() * kCannyOutChannels);
  int64_t wrong = 0, first = -1;
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] != float(expected[i / kCannyOutChannels]) && wrong++ == 0) first = int64_t(i / kCannyOutChannels);
  EXPECT_EQ(wrong, 0) << what << ": " << wrong << " values differ, the first at pixel " << first;
}

// Count of the edge pixels of y's first channel.
int64_t edge_count(const std::vector<float>& y) {
  int64_t n = 0;
  for (size_t i = 0; i < y.size(); i += kCannyOutChannels) n += y[i] == 1.0f;
  return n;
}

#if RTVD_TEST_HAS_OPENCV
// cv::Canny on each image's bytes, 1 on an edge.
std::vector<uint8_t> opencv_edges(const CannyCase& c, const std::vector<uint8_t>& b) {
  std::vector<uint8_t> edges(size_t(c.pixels()));
  for (int img = 0; img < c.n; ++img) {
    const cv::Mat src(c.h, c.w, CV_8UC(c.c), const_cast<uint8_t*>(b.data() + size_t(img) * c.h * c.w * c.c));
    cv::Mat dst;
    cv::Canny(src, dst, c.low, c.high);
    for (int r = 0; r < c.h; ++r)
      for (int q = 0; q < c.w; ++q) edges[(size_t(img) * c.h + r) * c.w + q] = dst.at<uint8_t>(r, q) ? 1 : 0;
  }
  return edges;
}
#endif

class CannyCpu : public testing::TestWithParam<CannyCase> {
 protected:
  void SetUp() override {
    if (!RTVD_TEST_HAS_OPENCV) GTEST_SKIP() << "no OpenCV to compare with";
  }
};

TEST_P(CannyCpu, EqualsOpenCv) {
#if RTVD_TEST_HAS_OPENCV
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (Picture kind : {Picture::Noise, Picture::SoftShapes, Picture::FlatBlocks}) {
    CannyCase c = GetParam();
    const std::vector<uint8_t> b = draw(rng, c, kind);
    const std::vector<float> x = to_source(b);
    for (int pair = 0; pair < 2; ++pair) {
      if (pair == 1) c.low = rng.integer(0, 250), c.high = rng.integer(0, 400);  // either order
      expect_edges(run_cpu(c, x), opencv_edges(c, b),
                   cat(picture_name(kind), ", low ", c.low, ", high ", c.high));
    }
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Cases, CannyCpu, testing::ValuesIn(canny_cases()), test::case_name);

#if RTVD_TEST_HAS_OPENCV
// A source off the byte grid rounds to the nearest byte (within 0.49 of a step), and one out of [-1, 1] or NaN
// clamps (NaN to 0): the edges are cv::Canny's of those bytes.
TEST(CannyCpuSource, RoundsAndClampsToTheBytes) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const CannyCase c{.name = "off_grid", .h = 41, .w = 57, .low = 40, .high = 120};
  std::vector<uint8_t> b = draw(rng, c, Picture::SoftShapes);
  std::vector<float> x = to_source(b);
  for (size_t i = 0; i < x.size(); ++i) {
    switch (rng.integer(0, 9)) {
      case 0: x[i] = 1.0f + rng.uniform(0, 5), b[i] = 255; break;
      case 1: x[i] = -1.0f - rng.uniform(0, 5), b[i] = 0; break;
      case 2: x[i] = std::nanf(""), b[i] = 0; break;
      default: x[i] += rng.uniform(-0.49f, 0.49f) / 127.5f;
    }
  }
  expect_edges(run_cpu(c, x), opencv_edges(c, b), "off-grid source");
}

// The snake is what the CUDA test's worst case needs: one edge through the whole image, equal to cv::Canny's.
TEST(CannyCpuSnake, IsOneLongEdge) {
  const CannyCase c = snake_case(96, 80);
  const std::vector<uint8_t> b = draw_snake(c);
  const std::vector<float> y = run_cpu(c, to_source(b));
  expect_edges(y, opencv_edges(c, b), "snake");
  EXPECT_GT(edge_count(y), c.h * c.w / 4) << "the snake's border should be an edge all along";
  CannyCase every_peak_strong = c;
  every_peak_strong.high = c.low;
  EXPECT_EQ(run_cpu(every_peak_strong, to_source(b)), y) << "some weak peaks are not linked to the strong end";
}
#endif

TEST(CannyCpuParams, RefusesBadParams) {
  const CannyCase c{.name = "bad", .h = 8, .w = 8};
  std::vector<float> x(size_t(c.pixels()) * c.c), y(size_t(c.pixels()) * kCannyOutChannels);
  const int32_t thresholds[2] = {c.low, c.high};
  std::vector<uint8_t> ws(canny_workspace_bytes(canny_params(c, x.data(), thresholds, y.data(), nullptr)));
  const auto error = [&](auto change) {
    CannyParams p = canny_params(c, x.data(), thresholds, y.data(), ws.data());
    change(p);
    return test::error_of([&] { canny_cpu(p); });
  };
  EXPECT_EQ(error([](CannyParams& p) { p.c = 5; }), "canny: c must be 1 to 4");
  EXPECT_EQ(error([](CannyParams& p) { p.c = 0; }), "canny: c must be 1 to 4");
  EXPECT_EQ(error([](CannyParams& p) { p.h = 0; }), "canny: n, h and w must be at least 1");
  EXPECT_EQ(error([](CannyParams& p) { p.n = 1 << 16, p.h = 1 << 8, p.w = 1 << 8; }),
            "canny: n * h * w must fit in int32 (the pixels' labels)");
  const std::string unset = "canny: x, thresholds, y and the workspace must be set";
  EXPECT_EQ(error([](CannyParams& p) { p.workspace = nullptr; }), unset);
  EXPECT_EQ(error([](CannyParams& p) { p.thresholds = nullptr; }), unset);
  EXPECT_EQ(error([](CannyParams&) {}), "<no error thrown>");
}

#if RTVD_HAS_CUDA

// The CUDA op on device copies of x, its output poisoned and its workspace junk; run twice.
void expect_cuda_equals_cpu(const CannyCase& c, const std::vector<float>& x, const CudaContext& ctx,
                            const std::string& what) {
  const std::vector<float> expected = run_cpu(c, x);
  std::vector<uint8_t> expected_edges(size_t(c.pixels()));
  for (size_t i = 0; i < expected_edges.size(); ++i) expected_edges[i] = uint8_t(expected[i * kCannyOutChannels]);
  const DeviceMemory x_d = test::to_device_float(x);
  const int32_t thresholds[2] = {c.low, c.high};
  const DeviceMemory thresholds_d = test::to_device_bytes(thresholds, sizeof(thresholds));
  const size_t ws_bytes = canny_workspace_bytes(canny_params(c, nullptr, nullptr, nullptr, nullptr));
  for (int run = 0; run < 2; ++run) {
    const DeviceMemory y_d = test::poisoned_float(size_t(c.pixels()) * kCannyOutChannels);
    const DeviceMemory ws_d = test::poisoned_bytes(ws_bytes);
    canny(canny_params(c, x_d.as<float>(), thresholds_d.as<int32_t>(), y_d.as<float>(), ws_d.get()), ctx);
    RTVD_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    expect_edges(test::from_device_float(y_d, size_t(c.pixels()) * kCannyOutChannels), expected_edges,
                 cat(what, ", run ", run));
  }
}

class CannyCuda : public test::OnCuda<CannyCase> {};

TEST_P(CannyCuda, EqualsCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  for (Picture kind : {Picture::Noise, Picture::SoftShapes, Picture::FlatBlocks}) {
    CannyCase c = GetParam();
    const std::vector<float> x = to_source(draw(rng, c, kind));
    for (int pair = 0; pair < 2; ++pair) {
      if (pair == 1) c.low = rng.integer(0, 250), c.high = rng.integer(0, 400);
      expect_cuda_equals_cpu(c, x, ctx(), cat(picture_name(kind), ", low ", c.low, ", high ", c.high));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Production, CannyCuda, testing::ValuesIn(test::production_cases(canny_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, CannyCuda, testing::ValuesIn(test::edge_cases(canny_cases())), test::case_name);

// Hysteresis's worst case: one weak edge winding through a whole 1024x1024 image from one strong end.
TEST(CannyCudaSnake, EqualsCpu) {
  RTVD_SKIP_WITHOUT_CUDA();
  const CudaHost host;
  const CannyCase c = snake_case(1024, 1024);
  const std::vector<float> x = to_source(draw_snake(c));
  EXPECT_GT(edge_count(run_cpu(c, x)), c.h * c.w / 4);
  expect_cuda_equals_cpu(c, x, host.ctx(), "snake");
}

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
