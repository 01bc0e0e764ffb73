// Separable resampling: one table of (source index, weight) per output index and axis, applied to rows
// and then to columns in float, so the result is rounded once, when the caller converts it.
#include "pipeline/io/image_ops.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace rtvd {

namespace {

// The source pixels output index o reads: weights[offset[o] .. offset[o + 1]) for first[o], first[o] + 1, ...
struct AxisWeights {
  std::vector<int> first;
  std::vector<size_t> offset;
  std::vector<float> weights;
};

// Output pixel o covers source span [o * scale, (o + 1) * scale); each source pixel weighs its overlap.
void add_area(AxisWeights& a, int src, int dst, int o) {
  const double scale = double(src) / dst, begin = o * scale, end = (o + 1) * scale;
  const int first = int(std::floor(begin)), last = std::min(src - 1, int(std::ceil(end)) - 1);
  a.first.push_back(first);
  for (int i = first; i <= last; ++i)
    a.weights.push_back(float((std::min(end, i + 1.0) - std::max(begin, double(i))) / scale));
}

// Output pixel centre o + 0.5 maps to source position (o + 0.5) * src / dst; pixel i's centre is i + 0.5.
void add_bilinear(AxisWeights& a, int src, int dst, int o) {
  const double c = std::clamp((o + 0.5) * src / dst - 0.5, 0.0, double(src - 1));
  const int i0 = int(std::floor(c));
  const double frac = c - i0;
  a.first.push_back(i0);
  a.weights.push_back(float(1.0 - frac));
  if (i0 + 1 < src) a.weights.push_back(float(frac));
}

AxisWeights axis_weights(int src, int dst) {
  AxisWeights a;
  a.offset.push_back(0);
  for (int o = 0; o < dst; ++o) {
    if (dst < src) {
      add_area(a, src, dst, o);
    } else if (dst > src) {
      add_bilinear(a, src, dst, o);
    } else {
      a.first.push_back(o);
      a.weights.push_back(1.0f);
    }
    a.offset.push_back(a.weights.size());
  }
  return a;
}

void check_arguments(const char* op, const PixelView& src, int width, int height) {
  if (!src.data || src.width <= 0 || src.height <= 0 || (src.channels != 3 && src.channels != 4) ||
      src.row_bytes < size_t(src.width) * size_t(src.channels))
    fail(op, ": source must be a non-empty 8-bit RGB or RGBA image, got ", src.width, "x", src.height, "x",
         src.channels, " with ", src.row_bytes, " bytes per row");
  if (width <= 0 || height <= 0) fail(op, ": target size must be positive, got ", width, "x", height);
}

}  // namespace

PixelView center_crop(const PixelView& src, int width, int height) {
  check_arguments("crop", src, width, height);
  PixelView out = src;
  // src.width / src.height against width / height, compared exactly in integers.
  const int64_t wide = int64_t(src.width) * height, tall = int64_t(src.height) * width;
  if (wide > tall) out.width = int(std::max<int64_t>(1, (tall + height / 2) / height));  // round(H * width / height)
  if (tall > wide) out.height = int(std::max<int64_t>(1, (wide + width / 2) / width));
  const int x0 = (src.width - out.width) / 2, y0 = (src.height - out.height) / 2;
  out.data += size_t(y0) * src.row_bytes + size_t(x0) * size_t(src.channels);
  return out;
}

namespace {

// The resampling of both outputs: rows, then columns, in [0, 255]; store(y, row) takes each output row of
// width * 3 floats.
template <class Store>
void resample(const PixelView& src, int width, int height, Store&& store) {
  check_arguments("resize", src, width, height);

  const AxisWeights wx = axis_weights(src.width, width), wy = axis_weights(src.height, height);
  // Rows first: (src.height, width, 3), still in [0, 255].
  std::vector<float> rows(size_t(src.height) * width * 3);
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.data + size_t(y) * src.row_bytes;
    float* out = &rows[size_t(y) * width * 3];
    for (int x = 0; x < width; ++x) {
      float acc[3] = {0, 0, 0};
      for (size_t k = wx.offset[x]; k < wx.offset[x + 1]; ++k) {
        const uint8_t* p = in + size_t(wx.first[x] + int(k - wx.offset[x])) * src.channels;
        for (int c = 0; c < 3; ++c) acc[c] += wx.weights[k] * p[c];
      }
      for (int c = 0; c < 3; ++c) out[x * 3 + c] = acc[c];
    }
  }
  // Then columns.
  const size_t row_floats = size_t(width) * 3;
  std::vector<float> out(row_floats);
  for (int y = 0; y < height; ++y) {
    std::fill(out.begin(), out.end(), 0.0f);
    for (size_t k = wy.offset[y]; k < wy.offset[y + 1]; ++k) {
      const float w = wy.weights[k];
      const float* in = &rows[size_t(wy.first[y] + int(k - wy.offset[y])) * row_floats];
      for (size_t i = 0; i < row_floats; ++i) out[i] += w * in[i];
    }
    store(y, out.data());
  }
}

}  // namespace

void resize_to_rgb_float(const PixelView& src, int width, int height, std::vector<float>& rgb) {
  const size_t row_floats = size_t(width) * 3;
  rgb.resize(size_t(height) * row_floats);
  resample(src, width, height, [&](int y, const float* row) {
    float* out = &rgb[size_t(y) * row_floats];
    for (size_t i = 0; i < row_floats; ++i) out[i] = row[i] / 127.5f - 1.0f;
  });
}

void resize_to_rgb8(const PixelView& src, int width, int height, std::vector<uint8_t>& rgb) {
  const size_t row_bytes = size_t(width) * 3;
  rgb.resize(size_t(height) * row_bytes);
  resample(src, width, height, [&](int y, const float* row) {
    uint8_t* out = &rgb[size_t(y) * row_bytes];
    for (size_t i = 0; i < row_bytes; ++i) out[i] = uint8_t(std::clamp(std::lround(row[i]), 0L, 255L));
  });
}

}  // namespace rtvd
