// canny: four kernels, the same edges as canny_cpu (canny.h says what they are).
//
// Hysteresis asks which peaks are 8-connected through peaks to a strong peak: a connected-components question.
// An iterated flood fill (each pass growing the edges by a pixel, or by a tile) is exact only after as many
// passes as the longest chain of weak pixels, up to the image's area for a winding edge; a fixed pass count
// would be approximate, and repeating until nothing changes needs the host, or graph conditional nodes, to
// decide. Union-find needs neither: every peak starts as its own label; each peak is linked with its peak
// neighbours (left, up-left, up, up-right: every 8-neighbour pair once) by lock-free union (ECL-CC, Jaiganesh and
// Burtscher 2018: a label only ever points to a smaller index, roots are linked by atomicCAS, paths halved on
// the way); when the link kernel ends, two peaks share a root exactly when they are connected, whatever order
// the threads ran in. Then each strong pixel marks its root, and a peak is an edge when its root is marked.
// Four launches, the same for every image: capturable, exact and repeatable.
//   classify  bytes -> Sobel -> magnitudes -> classes, in shared memory per 32x8 tile (with its halo)
//   link      union of neighbouring peaks
//   mark      classes[root] = kRootOfStrong for every strong pixel's root
//   output    y = peak and classes[root] == kRootOfStrong
#include "kernels/canny/canny.cuh"

#include <algorithm>

#include "kernels/common/launch.cuh"

namespace rtvd {

namespace {

constexpr int kTileW = 32, kTileH = 8;  // pixels per classify block, a thread each
constexpr int kThreads = 256;           // link, mark and output: a thread per pixel, grid-stride
// A root whose component holds a strong pixel (a class byte value beyond CannyClass's, set by mark).
constexpr uint8_t kRootOfStrong = 3;

// The byte a source value came from, as canny_cpu's to_byte: IEEE add and multiply (never contracted), NaN to 0
// (fmaxf returns the number), half to even.
__device__ __forceinline__ int to_byte(float x) {
  return __float2int_rn(fminf(fmaxf(__fmul_rn(__fadd_rn(x, 1.0f), 127.5f), 0.0f), 255.0f));
}

// One block per 32x8 tile of one image (blockIdx.z): the tile's bytes with a 2-pixel halo (border replicated),
// the magnitudes with a 1-pixel halo (0 outside the image) and each pixel's gradient, then its class. Each peak's
// label is its own index.
__global__ void __launch_bounds__(kTileW * kTileH)
canny_classify_kernel(CannyParams p, uint8_t* __restrict__ classes, int* __restrict__ labels) {
  start_after_prior_kernels();
  __shared__ uint8_t bytes[kCannyMaxChannels][kTileH + 4][kTileW + 4];
  __shared__ int mags[kTileH + 2][kTileW + 2];
  __shared__ short grads[2][kTileH + 2][kTileW + 2];
  const int img = blockIdx.z, y0 = blockIdx.y * kTileH, x0 = blockIdx.x * kTileW;
  const int tid = threadIdx.y * kTileW + threadIdx.x;
  const float* x = p.x + int64_t(img) * p.h * p.w * p.c;
  for (int i = tid; i < (kTileH + 4) * (kTileW + 4); i += kTileW * kTileH) {
    const int r = i / (kTileW + 4), q = i % (kTileW + 4);
    const int gy = min(max(y0 - 2 + r, 0), p.h - 1), gx = min(max(x0 - 2 + q, 0), p.w - 1);
    for (int ch = 0; ch < p.c; ++ch) bytes[ch][r][q] = uint8_t(to_byte(x[(int64_t(gy) * p.w + gx) * p.c + ch]));
  }
  __syncthreads();
  for (int i = tid; i < (kTileH + 2) * (kTileW + 2); i += kTileW * kTileH) {
    const int r = i / (kTileW + 2), q = i % (kTileW + 2), gy = y0 - 1 + r, gx = x0 - 1 + q;
    int best = 0, best_dx = 0, best_dy = 0;
    if (gy >= 0 && gy < p.h && gx >= 0 && gx < p.w) {
      best = -1;
      for (int ch = 0; ch < p.c; ++ch) {
        int v[3][3], dx, dy;
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) v[a][b] = bytes[ch][r + a][q + b];
        canny_sobel(v, dx, dy);
        if (abs(dx) + abs(dy) > best) best = abs(dx) + abs(dy), best_dx = dx, best_dy = dy;
      }
    }
    mags[r][q] = best;
    grads[0][r][q] = short(best_dx), grads[1][r][q] = short(best_dy);
  }
  __syncthreads();
  const int gy = y0 + threadIdx.y, gx = x0 + threadIdx.x;
  if (gy >= p.h || gx >= p.w) return;
  const int r = threadIdx.y + 1, q = threadIdx.x + 1;
  int m[3][3];
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) m[a][b] = mags[r + a - 1][q + b - 1];
  const CannyClass k = canny_class(m, grads[0][r][q], grads[1][r][q], p.thresholds[0], p.thresholds[1]);
  const int i = (img * p.h + gy) * p.w + gx;
  classes[i] = k;
  labels[i] = k == kCannyNone ? -1 : i;
}

// The root of i's tree, halving the path on the way (each node passed is pointed at its grandparent, an ancestor,
// so every tree stays a tree of its component). Labels are read volatile: other threads link and halve meanwhile.
__device__ int find_root(int* labels, int i) {
  volatile int* l = labels;
  int parent = l[i];
  if (parent != i) {
    int prev = i, next;
    while (parent > (next = l[parent])) {  // parent is not a root (a root is its own label)
      l[prev] = next;
      prev = parent;
      parent = next;
    }
  }
  return parent;
}

// Joins the trees of a and b: the larger root is pointed at the smaller by atomicCAS; when another thread linked
// it first, the CAS returns its new parent and the walk goes on from there.
__device__ void unite(int* labels, int a, int b) {
  int ra = find_root(labels, a), rb = find_root(labels, b);
  while (ra != rb) {
    if (ra < rb) {
      const int t = ra;
      ra = rb, rb = t;
    }
    const int old = atomicCAS(&labels[ra], ra, rb);
    if (old == ra) return;
    ra = old;
  }
}

__global__ void __launch_bounds__(kThreads)
canny_link_kernel(const uint8_t* __restrict__ classes, int* labels, int h, int w, int pixels) {
  start_after_prior_kernels();
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < pixels; i += gridDim.x * kThreads) {
    if (classes[i] == kCannyNone) continue;
    const int q = i % w, r = (i / w) % h;
    if (q > 0 && classes[i - 1] != kCannyNone) unite(labels, i, i - 1);
    if (r == 0) continue;
    for (int b = max(q - 1, 0); b <= min(q + 1, w - 1); ++b)
      if (classes[i - w + b - q] != kCannyNone) unite(labels, i, i - w + b - q);
  }
}

// Each strong pixel marks its root. A root's own class byte may turn from kCannyWeak or kCannyStrong into
// kRootOfStrong while others read it: either way it reads as a peak, and a reader that takes it for strong only
// marks the same root again.
__global__ void __launch_bounds__(kThreads)
canny_mark_kernel(uint8_t* classes, int* labels, int pixels) {
  start_after_prior_kernels();
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < pixels; i += gridDim.x * kThreads)
    if (classes[i] >= kCannyStrong) classes[find_root(labels, i)] = kRootOfStrong;
}

__global__ void __launch_bounds__(kThreads)
canny_output_kernel(const uint8_t* __restrict__ classes, int* labels, float* __restrict__ y, int pixels) {
  start_after_prior_kernels();
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < pixels; i += gridDim.x * kThreads) {
    const bool edge = classes[i] != kCannyNone && classes[find_root(labels, i)] == kRootOfStrong;
    for (int ch = 0; ch < kCannyOutChannels; ++ch) y[int64_t(i) * kCannyOutChannels + ch] = edge ? 1.0f : 0.0f;
  }
}

}  // namespace

void canny(const CannyParams& p, const CudaContext& ctx) {
  if (const char* why = canny_params_error(p); *why) fail("canny: ", why);
  auto* classes = static_cast<uint8_t*>(p.workspace);
  auto* labels = reinterpret_cast<int*>(classes + canny_classes_bytes(p));
  const int pixels = p.n * p.h * p.w;
  const dim3 tiles((p.w + kTileW - 1) / kTileW, (p.h + kTileH - 1) / kTileH, p.n);
  launch_kernel("canny_classify", canny_classify_kernel, tiles, dim3(kTileW, kTileH), 0, ctx.stream, p, classes, labels);
  const int blocks = std::min((pixels + kThreads - 1) / kThreads, 8 * std::max(ctx.sm_count, 1));
  launch_kernel("canny_link", canny_link_kernel, blocks, kThreads, 0, ctx.stream, classes, labels, p.h, p.w, pixels);
  launch_kernel("canny_mark", canny_mark_kernel, blocks, kThreads, 0, ctx.stream, classes, labels, pixels);
  launch_kernel("canny_output", canny_output_kernel, blocks, kThreads, 0, ctx.stream, classes, labels, p.y, pixels);
}

}  // namespace rtvd
