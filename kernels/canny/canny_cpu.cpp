// canny on the CPU, one image after the other, in the order cv::Canny works: the magnitudes and the classes of
// the whole image, then hysteresis as a depth-first flood from every strong pixel over the weak ones (OpenCV's
// stack), then the output. The CUDA op (canny.cu) finds the same edges another way (union-find) and is tested
// against this one; this one is tested against cv::Canny.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/canny/canny.h"

namespace rtvd {

const char* canny_params_error(const CannyParams& p) {
  if (!p.x || !p.thresholds || !p.y || !p.workspace) return "x, thresholds, y and the workspace must be set";
  if (p.n < 1 || p.h < 1 || p.w < 1) return "n, h and w must be at least 1";
  if (int64_t(p.n) * p.h * p.w > INT32_MAX) return "n * h * w must fit in int32 (the pixels' labels)";
  if (p.c < 1 || p.c > kCannyMaxChannels) return "c must be 1 to 4";
  return "";
}

namespace {

uint8_t to_byte(float x) {
  const float v = std::fmin(std::fmax((x + 1.0f) * 127.5f, 0.0f), 255.0f);  // NaN: 0
  return uint8_t(std::nearbyint(v));                                      // half to even
}

// One image: x (h, w, c) to y (h, w, 3), with classes and ints (h * w each) as scratch.
void canny_image(const CannyParams& p, const float* x, float* y, uint8_t* classes, int32_t* ints) {
  const int h = p.h, w = p.w, c = p.c;
  const auto byte = [&](int r, int q, int ch) {  // border replicated
    return int(to_byte(x[(int64_t(std::clamp(r, 0, h - 1)) * w + std::clamp(q, 0, w - 1)) * c + ch]));
  };
  // A pixel's gradient, of its channel of the largest magnitude (the first on ties); returns the magnitude.
  const auto gradient = [&](int r, int q, int& dx, int& dy) {
    int best = -1;
    for (int ch = 0; ch < c; ++ch) {
      int v[3][3], cdx, cdy;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) v[i][j] = byte(r + i - 1, q + j - 1, ch);
      canny_sobel(v, cdx, cdy);
      if (std::abs(cdx) + std::abs(cdy) > best) best = std::abs(cdx) + std::abs(cdy), dx = cdx, dy = cdy;
    }
    return best;
  };
  int dx = 0, dy = 0;
  for (int r = 0; r < h; ++r)
    for (int q = 0; q < w; ++q) ints[int64_t(r) * w + q] = gradient(r, q, dx, dy);
  // The classes; the gradient's direction computed again rather than kept (the workspace holds one int a pixel).
  for (int r = 0; r < h; ++r)
    for (int q = 0; q < w; ++q) {
      int m[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          const int rr = r + i - 1, qq = q + j - 1;
          m[i][j] = rr < 0 || rr >= h || qq < 0 || qq >= w ? 0 : ints[int64_t(rr) * w + qq];
        }
      gradient(r, q, dx, dy);
      classes[int64_t(r) * w + q] = canny_class(m, dx, dy, p.thresholds[0], p.thresholds[1]);
    }
  // Hysteresis: ints now hold the stack of edge pixels whose neighbours are still to be visited; each pixel
  // enters it once, when it becomes an edge (kCannyStrong).
  int32_t* stack = ints;
  int64_t top = 0;
  for (int32_t i = 0; i < int32_t(h) * w; ++i)
    if (classes[i] == kCannyStrong) stack[top++] = i;
  while (top > 0) {
    const int32_t i = stack[--top];
    const int r = i / w, q = i % w;
    for (int rr = std::max(r - 1, 0); rr <= std::min(r + 1, h - 1); ++rr)
      for (int qq = std::max(q - 1, 0); qq <= std::min(q + 1, w - 1); ++qq) {
        const int32_t j = rr * w + qq;
        if (classes[j] == kCannyWeak) classes[j] = kCannyStrong, stack[top++] = j;
      }
  }
  for (size_t i = 0; i < size_t(h) * w; ++i)
    std::fill_n(y + i * kCannyOutChannels, kCannyOutChannels, classes[i] == kCannyStrong ? 1.0f : 0.0f);
}

}  // namespace

void canny_cpu(const CannyParams& p) {
  if (const char* why = canny_params_error(p); *why) fail("canny: ", why);
  const int64_t pixels = int64_t(p.h) * p.w;
  auto* classes = static_cast<uint8_t*>(p.workspace);
  auto* ints = reinterpret_cast<int32_t*>(classes + canny_classes_bytes(p));
  for (int b = 0; b < p.n; ++b)
    canny_image(p, p.x + b * pixels * p.c, p.y + b * pixels * kCannyOutChannels, classes, ints);
}

}  // namespace rtvd
