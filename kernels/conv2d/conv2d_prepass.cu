// conv2d_prepass.cuh: pre(x) = silu(GroupNorm affine(x)) as its own pass: group_norm's normalise pass from the
// statistics given (group_norm_apply), or with a norm to fuse the whole norm, statistics included.
#include "kernels/conv2d/conv2d_prepass.cuh"

#include <algorithm>
#include <cstdint>

#include "kernels/common/alignment.h"
#include "kernels/group_norm/group_norm.cuh"

namespace rtvd {

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
  GroupNormParams q;
  q.x = p.x;
  q.y = normalized;
  q.gamma = p.gn_gamma;
  q.beta = p.gn_beta;
  q.n = p.n, q.hw = p.h * p.w, q.c = p.c_in, q.groups = p.gn_groups;
  q.act = Activation::Silu;
  if (norm) {
    q.stats = norm->stats;
    q.eps = norm->eps;
    CudaContext front = ctx;  // the partial statistics stay in front of pre(x)
    front.workspace_bytes = offset;
    group_norm(q, front);
  } else {
    q.stats = const_cast<float*>(p.gn_stats);  // read, not written: group_norm_apply
    group_norm_apply(q, ctx);
  }
  return normalized;
}

}  // namespace rtvd
