// conv2d for an image model's first conv: 3x3, stride 1, from at most 3 channels (RGB) to many (TAESD's 3 -> 64
// and the SD VAE's 3 -> 128 at the frame's full size). Its whole K (9 taps x c_in <= 27) is one padded k32
// step, but the implicit GEMMs and cuDNN take it 8 channels a tap (72, most of it zeros: cuDNN pads x in a
// kernel of its own first); the layer is bound by writing y (64 or 128 channels a pixel). A block stages its
// input tile (halo included, 4 halves a pixel) in shared memory once, gathers each pixel's 27 values as m16n8k16
// A fragments straight from it, keeps the weights in registers, and stores y through shared memory in 16-byte
// coalesced chunks.
#pragma once
#include <string>

#include "kernels/conv2d/conv2d.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// Whether conv2d_stem can run p; if not and why is given, *why names the unmet requirement. Needs an sm_80+ GPU,
// a 3x3 kernel with stride 1, c_in <= 3, c_out a multiple of 8, no GroupNorm prologue. Any alignment. Assumes
// valid params.
bool conv2d_stem_can_implement(const Conv2dParams& p, const CudaContext& ctx, std::string* why = nullptr);

// y = conv2d.h's function of p, on ctx.stream; no workspace. Throws rtvd::Error for invalid params or where
// conv2d_stem_can_implement() is false.
void conv2d_stem(const Conv2dParams& p, const CudaContext& ctx);

}  // namespace rtvd
