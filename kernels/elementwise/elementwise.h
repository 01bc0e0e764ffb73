// Small memory-bound ops of the U-Net and the autoencoders: GEGLU, SiLU, nearest 2x upsampling, channel
// concat, and an activation between two affine maps (plus a residual: the sums of ControlNet residuals).
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

// y = out_scale * act(in_scale * x + in_shift) (+ residual), element by element: what the autoencoders do to
// their inputs that no conv can absorb, because the conv after them zero-pads (TAESD's encoder maps the image
// to [0, 1] with in_scale 0.5, in_shift 0.5; its decoder clamps latents softly, 3 tanh(x / 3)); a ControlNet's
// residual scaled by its conditioning scale and added to another net's, or to the U-Net's skip.
struct ScaleActivationParams {
  const void* x = nullptr;
  void* y = nullptr;  // may be x
  const void* residual = nullptr;  // (count) or null: added last; may be y
  int64_t count = 0;
  float in_scale = 1.0f, in_shift = 0.0f, out_scale = 1.0f;
  Activation act = Activation::None;  // any of activation.h's
};

void geglu_cpu(const GegluParams& p);
void silu_cpu(const SiluParams& p);
void upsample2x_cpu(const Upsample2xParams& p);
void concat_cpu(const ConcatParams& p);
void scale_activation_cpu(const ScaleActivationParams& p);

}  // namespace rtvd
