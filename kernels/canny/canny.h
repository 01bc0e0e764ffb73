// canny: the Canny edge map of the frame's source images, as ControlNet's canny preprocessor makes it (diffusers'
// docs and lllyasviel's annotator: cv2.Canny on the RGB8 image, the map stacked to 3 channels). Pixel for pixel
// OpenCV's cv::Canny(bytes, edges, low, high) with its defaults (3x3 Sobel, L1 gradient) on the image's bytes:
//   bytes      b = clamp(round_half_even((x + 1) * 127.5), 0, 255): the byte a source value came from (the
//              inverse of rgb8_to_float; NaN gives 0)
//   gradient   per channel the 3x3 Sobel dx, dy (border replicated) and m = |dx| + |dy|; a pixel takes the
//              channel of the largest m (the first on ties), as cv::Canny does on a colour image (no grey)
//   peak       m > low and m a maximum along the gradient (canny_peak); m is 0 outside the image
//   hysteresis the peaks 8-connected, through peaks, to a peak with m > high are edges
//   y          1 on an edge, else 0, in each of its 3 channels: the control image as diffusers' ControlNet
//              pipelines feed it to the net (prepare_image: [0, 1], not normalised)
#pragma once
#include <cstddef>
#include <cstdint>

namespace rtvd {

struct CannyParams {
  const float* x = nullptr;           // (n, h, w, c) fp32: the source images in [-1, 1]
  const int32_t* thresholds = nullptr;  // (2) int32: cv::Canny's low and high (swapped when low > high, as it
                                      // does), read when the op runs: they change without a new plan or graph
  float* y = nullptr;                 // (n, h, w, 3) fp32: the edge maps
  void* workspace = nullptr;          // canny_workspace_bytes(p): the pixels' classes, and per pixel an int32
  int n = 0, h = 0, w = 0, c = 3;     // c: 1 to kCannyMaxChannels
};

constexpr int kCannyMaxChannels = 4;
constexpr int kCannyOutChannels = 3;

// A pixel's class after non-maximum suppression and the double threshold (the values in the workspace).
enum CannyClass : uint8_t { kCannyNone = 0, kCannyWeak = 1, kCannyStrong = 2 };

// The workspace: (n, h, w) class bytes, then (n, h, w) int32 at a 4-byte boundary (CPU: the magnitudes, then the
// hysteresis stack; CUDA: the union-find labels).
inline size_t canny_classes_bytes(const CannyParams& p) { return (size_t(p.n) * p.h * p.w + 3) / 4 * 4; }
inline size_t canny_workspace_bytes(const CannyParams& p) {
  return canny_classes_bytes(p) + size_t(p.n) * p.h * p.w * sizeof(int32_t);
}

// The first thing wrong with p (a null pointer, a size or channel count out of range), or "" when the op can run
// it. Both implementations check it; any thresholds are valid.
const char* canny_params_error(const CannyParams& p);

// 3x3 Sobel of one channel's bytes v (row-major, the pixel at v[1][1]), as cv::Sobel with ksize 3: dx the
// right column minus the left, dy the bottom row minus the top, each weighted 1, 2, 1.
constexpr void canny_sobel(const int (&v)[3][3], int& dx, int& dy) {
  dx = (v[0][2] - v[0][0]) + 2 * (v[1][2] - v[1][0]) + (v[2][2] - v[2][0]);
  dy = (v[2][0] - v[0][0]) + 2 * (v[2][1] - v[0][1]) + (v[2][2] - v[0][2]);
}

// Whether the centre m[1][1] of a 3x3 window of magnitudes (row-major, the row above first) is a maximum along the
// gradient (dx, dy), with cv::Canny's tie-breaking. The direction's sector comes from 15-bit fixed point:
// |dy| < tan(22.5°) |dx| is horizontal (left, right), |dy| > tan(67.5°) |dx| vertical (above, below), the rest
// diagonal (up-left and down-right where dx and dy have the same sign, up-right and down-left where not).
// Horizontal and vertical: strictly above the left or upper neighbour, at least the other; diagonal: strictly
// above both. |dx|, |dy| <= 1020 for bytes, so no product overflows.
constexpr bool canny_peak(const int (&m)[3][3], int dx, int dy) {
  constexpr int kTan22 = 13573;  // round(tan(22.5°) * 2^15)
  const int ax = dx < 0 ? -dx : dx, ay = (dy < 0 ? -dy : dy) * 32768;
  const int tan22 = ax * kTan22, c = m[1][1];
  if (ay < tan22) return c > m[1][0] && c >= m[1][2];
  if (ay > tan22 + ax * 65536) return c > m[0][1] && c >= m[2][1];  // tan(67.5°) = tan(22.5°) + 2
  return (dx ^ dy) < 0 ? c > m[0][2] && c > m[2][0] : c > m[0][0] && c > m[2][2];
}

// A pixel's class from its window of magnitudes, its gradient and the thresholds (in either order).
constexpr CannyClass canny_class(const int (&m)[3][3], int dx, int dy, int low, int high) {
  if (m[1][1] <= (low < high ? low : high) || !canny_peak(m, dx, dy)) return kCannyNone;
  return m[1][1] > (low < high ? high : low) ? kCannyStrong : kCannyWeak;
}

void canny_cpu(const CannyParams& p);

}  // namespace rtvd
