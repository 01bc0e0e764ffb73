// Small memory-bound ops of the U-Net: GEGLU, SiLU, nearest 2x upsampling, channel concat.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

// y = hidden * gelu(gate) with x = [hidden | gate] along the last dimension (diffusers GEGLU, exact gelu).
struct GegluParams {
  const void* x = nullptr;  // (rows, 2 f)
  void* y = nullptr;        // (rows, f)
  int rows = 0, f = 0;
};

struct SiluParams {
  const void* x = nullptr;
  void* y = nullptr;
  int64_t count = 0;
};

// Nearest-neighbour 2x upsampling, NHWC.
struct Upsample2xParams {
  const void* x = nullptr;  // (n, h, w, c)
  void* y = nullptr;        // (n, 2h, 2w, c)
  int n = 0, h = 0, w = 0, c = 0;
};

// y = [a | b] along channels (torch.cat(dim=1) in NCHW).
struct ConcatParams {
  const void* a = nullptr;  // (pixels, ca)
  const void* b = nullptr;  // (pixels, cb)
  void* y = nullptr;        // (pixels, ca + cb)
  int64_t pixels = 0;
  int ca = 0, cb = 0;
};

void geglu_cpu(const GegluParams& p);
void silu_cpu(const SiluParams& p);
void upsample2x_cpu(const Upsample2xParams& p);
void concat_cpu(const ConcatParams& p);

}  // namespace rtvd
