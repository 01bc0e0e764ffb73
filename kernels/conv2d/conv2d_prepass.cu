// conv2d_prepass.cuh: pre(x) = silu(GroupNorm affine(x)) as its own pass.
#include "kernels/conv2d/conv2d_prepass.cuh"

#include <algorithm>
#include <cstdint>

#include "kernels/common/alignment.h"
#include "kernels/conv2d/conv2d_traits.cuh"
#include "kernels/group_norm/group_norm.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

using namespace conv2d_detail;

// pre(x) = silu(GroupNorm affine(x)) for 8 channels of one pixel per thread (fewer at the end of a row
// when c_in % 8 != 0); vec: 16-byte loads and stores.
__global__ void gn_silu_prepass_kernel(const __grid_constant__ Conv2dParams p, __half* out, bool vec) {
  start_after_prior_kernels();
  const auto* x = static_cast<const __half*>(p.x);
  const int chunks_c = (p.c_in + 7) / 8;
  const int64_t hw = int64_t(p.h) * p.w, chunks = p.n * hw * chunks_c;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < chunks; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pixel = idx / chunks_c;
    const int c = int(idx % chunks_c) * 8, img = int(pixel / hw);
    const int64_t offset = pixel * p.c_in + c;
    if (vec) {
      uint4 raw = *reinterpret_cast<const uint4*>(x + offset);
      auto* h2 = reinterpret_cast<__half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 v = __half22float2(h2[j]);
        const float2 f0 = gn_fold(p, img, c + 2 * j), f1 = gn_fold(p, img, c + 2 * j + 1);
        h2[j] = __floats2half2_rn(fast_silu(v.x * f0.x + f0.y), fast_silu(v.y * f1.x + f1.y));
      }
      *reinterpret_cast<uint4*>(out + offset) = raw;
    } else {
      for (int j = 0; j < 8 && c + j < p.c_in; ++j) {
        const float2 f = gn_fold(p, img, c + j);
        out[offset + j] = __float2half_rn(fast_silu(__half2float(x[offset + j]) * f.x + f.y));
      }
    }
  }
}

}  // namespace

size_t conv2d_prepass_offset(const Conv2dParams& p, size_t front_bytes) {
  return align_up(std::max(front_bytes, group_norm_workspace_bytes(p.n)));
}

size_t conv2d_prepass_workspace_bytes(const Conv2dParams& p, size_t front_bytes) {
  return conv2d_prepass_offset(p, front_bytes) + align_up(sizeof(__half) * size_t(p.n) * p.h * p.w * p.c_in);
}

const __half* conv2d_prepass(const Conv2dParams& p, const GroupNormParams* norm, size_t front_bytes,
                             const CudaContext& ctx) {
  if (!p.gn_stats) fail("conv2d_prepass: the conv has no GroupNorm prologue");
  if (ctx.workspace_bytes < conv2d_prepass_workspace_bytes(p, front_bytes))
    fail("conv2d_prepass: needs ", conv2d_prepass_workspace_bytes(p, front_bytes), " bytes of ctx.workspace, has ",
         ctx.workspace_bytes);
  if (norm && (norm->x != p.x || norm->stats != p.gn_stats || norm->n != p.n || norm->hw != p.h * p.w ||
               norm->c != p.c_in || norm->groups != p.gn_groups || norm->y))
    fail("conv2d_prepass: the GroupNorm to fuse is not the statistics-only norm of this conv's input");
  const size_t offset = conv2d_prepass_offset(p, front_bytes);
  auto* normalized = reinterpret_cast<__half*>(static_cast<uint8_t*>(ctx.workspace) + offset);
  if (norm) {
    GroupNormParams q = *norm;
    q.y = normalized;
    q.gamma = p.gn_gamma;
    q.beta = p.gn_beta;
    q.act = Activation::Silu;
    CudaContext front = ctx;  // the partial statistics stay in front of pre(x)
    front.workspace_bytes = offset;
    group_norm(q, front);
    return normalized;
  }
  const int64_t chunks = int64_t(p.n) * p.h * p.w * ((p.c_in + 7) / 8);
  const bool vec = p.c_in % 8 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  const int blocks = int(std::clamp<int64_t>((chunks + 255) / 256, 1, int64_t(32) * std::max(ctx.sm_count, 1)));
  launch_kernel("conv2d GroupNorm pre-pass", gn_silu_prepass_kernel, blocks, 256, 0, ctx.stream, p, normalized, vec);
  return normalized;
}

}  // namespace rtvd
