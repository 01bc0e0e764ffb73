// conv2d's candidates and its one entry point, conv2d(): see conv2d_candidates.cuh.
#include "kernels/conv2d/conv2d_candidates.cuh"

#include <memory>

#include "kernels/common/plan_cache.h"
#include "kernels/conv2d/conv2d.cuh"
#include "kernels/conv2d/conv2d_narrow.cuh"
#include "kernels/conv2d/conv2d_sm90.cuh"
#include "kernels/conv2d/conv2d_stem.cuh"
#if RTVD_HAS_CUDNN
#include "kernels/conv2d/conv2d_cudnn.cuh"
#endif

namespace rtvd {
namespace {

constexpr size_t kWgmmaCandidates = 6;  // tiles offered, the best-ranked by conv2d_sm90_tiles()
// Split-K's partial sums may take this much workspace when the mma.sync config is chosen for a shape: the
// caller provides what the chosen candidate's workspace_bytes() says.
constexpr size_t kSplitKBudget = size_t(256) << 20;

Conv2dCandidate wgmma_candidate(const Conv2dParams& p, const Conv2dSm90Tile& tile) {
  Conv2dCandidate c;
  c.name = cat("custom wgmma ", tile.name);
  c.takes_prepass = p.gn_stats != nullptr;
  c.can_implement = [](const Conv2dParams& q, const CudaContext& ctx, std::string* why) {
    return conv2d_sm90_can_implement(q, ctx, why);
  };
  c.workspace_bytes = [tile](const Conv2dParams& q, const CudaContext&) { return conv2d_sm90_workspace_bytes(q, tile); };
  c.run = [tile](const Conv2dParams& q, const CudaContext& ctx, const GroupNormParams* norm) {
    conv2d_sm90(q, ctx, &tile, norm);
  };
  return c;
}

// A kernel of ours for a few channels in or out (the stem, the narrow kernel): no workspace, and no norm handed
// over (the narrow kernel applies the GroupNorm prologue as it loads; the stem takes none).
Conv2dCandidate few_channels_candidate(const char* name,
                                       bool (*can_implement)(const Conv2dParams&, const CudaContext&, std::string*),
                                       void (*run)(const Conv2dParams&, const CudaContext&)) {
  Conv2dCandidate c;
  c.name = name;
  c.can_implement = can_implement;
  c.workspace_bytes = [](const Conv2dParams&, const CudaContext&) { return size_t(0); };
  c.run = [run, name = c.name](const Conv2dParams& q, const CudaContext& ctx, const GroupNormParams* norm) {
    if (norm) fail("conv2d: ", name, " takes no handed-over GroupNorm: no norm to fuse");
    run(q, ctx);
  };
  return c;
}

Conv2dCandidate mma_candidate(const Conv2dConfig& cfg) {
  Conv2dCandidate c;
  c.name = cat("custom ", conv2d_kernel_name(cfg.kernel));
  c.fallback = cfg.kernel == Conv2dKernel::Direct;  // one thread per output: any c_in and alignment
  if (cfg.split_k > 1) c.name += cat(" split-k ", cfg.split_k);
  c.can_implement = [cfg](const Conv2dParams& q, const CudaContext&, std::string* why) {
    return conv2d_config_can_implement(q, cfg, why);
  };
  c.workspace_bytes = [cfg](const Conv2dParams& q, const CudaContext&) { return conv2d_workspace_bytes(q, cfg); };
  c.run = [cfg, name = c.name](const Conv2dParams& q, const CudaContext& ctx, const GroupNormParams* norm) {
    if (norm) fail("conv2d: ", name, " applies the GroupNorm prologue as it loads: no norm to fuse");
    conv2d_with_config(q, cfg, ctx);
  };
  return c;
}

#if RTVD_HAS_CUDNN
// cuDNN's plan for p's shape (fused: for the fused form), made at the first ask and kept in ctx.plans; null
// where cuDNN has none.
const Conv2dCudnnPlan* cudnn_plan(const Conv2dParams& p, const CudaContext& ctx, bool fused) {
  if (!ctx.cudnn || !ctx.plans) return nullptr;
  return ctx.plans->get<Conv2dCudnnPlan>(
      cat("conv2d ", conv2d_shape_key(p), fused ? " cudnn fused" : ""), [&]() -> std::unique_ptr<Conv2dCudnnPlan> {
        try {
          return std::make_unique<Conv2dCudnnPlan>(make_conv2d_cudnn_plan(p, ctx.cudnn, size_t(32) << 20, fused));
        } catch (const Error&) {
          return nullptr;  // no algorithm for the shape: the candidate says so in can_implement
        }
      });
}

// cuDNN's convolution with our epilogue pass after it, or (fused) with the epilogue in its own.
Conv2dCandidate cudnn_candidate(const Conv2dParams& p, bool fused) {
  Conv2dCandidate c;
  c.name = fused ? "cuDNN fused" : "cuDNN";
  c.provider = Provider::Cudnn;
  c.takes_prepass = p.gn_stats != nullptr;
  c.can_implement = [fused](const Conv2dParams& q, const CudaContext& ctx, std::string* why) {
    std::string fuse_why;
    const char* unmet = !ctx.cudnn || !ctx.plans ? "no cuDNN handle and plan cache in the context"
                        : q.residual && q.residual == q.y ? "residual must not alias y (the epilogue runs in place on y)"
                        : !conv2d_symmetric(q)
                            ? "cuDNN pads both sides alike: h_out and w_out must be (h + 2 pad - kh) / stride + 1"
                        : fused && !conv2d_cudnn_fuses(q, &fuse_why) ? fuse_why.c_str()
                        : !cudnn_plan(q, ctx, fused) ? "cuDNN has no algorithm for the shape"
                                                     : nullptr;
    if (unmet && why) *why = unmet;
    return unmet == nullptr;
  };
  c.workspace_bytes = [fused](const Conv2dParams& q, const CudaContext& ctx) {
    const Conv2dCudnnPlan* plan = cudnn_plan(q, ctx, fused);
    return plan ? plan->workspace_bytes : 0;
  };
  c.run = [fused, name = c.name](const Conv2dParams& q, const CudaContext& ctx, const GroupNormParams* norm) {
    const Conv2dCudnnPlan* plan = cudnn_plan(q, ctx, fused);
    if (!plan) fail("conv2d: ", name, " can't run ", conv2d_shape_key(q));
    conv2d_cudnn(q, *plan, ctx, norm);
  };
  return c;
}
#endif

}  // namespace

std::string conv2d_shape_key(const Conv2dParams& p) {
  return cat(p.n, "x", p.h, "x", p.w, "x", p.c_in, " -> ", p.c_out, " k", p.kh, "x", p.kw, " s", p.stride, " p", p.pad,
             conv2d_symmetric(p) ? std::string() : cat(" out ", p.h_out, "x", p.w_out),
             p.gn_stats ? cat(" gn", p.gn_groups) : std::string(), p.residual ? " res" : "",
             p.act != Activation::None ? cat(" ", activation_name(p.act)) : std::string(),
             p.residual && p.act_after_residual ? " act after res" : "", p.scale_batch_stride ? " film" : "");
}

std::vector<Conv2dCandidate> conv2d_candidates(const Conv2dParams& p, const CudaContext& ctx) {
  CudaContext budget = ctx;
  budget.workspace_bytes = kSplitKBudget;
  const Conv2dConfig preferred = conv2d_choose_config(p, budget);  // checks p first: invalid params throw here
  std::vector<Conv2dCandidate> out;
  // Few input or output channels: the kernels made for them first (the tiles below are mostly empty there).
  if (conv2d_stem_can_implement(p, ctx))
    out.push_back(few_channels_candidate("custom stem", conv2d_stem_can_implement, conv2d_stem));
  if (conv2d_narrow_can_implement(p, ctx))
    out.push_back(few_channels_candidate("custom narrow", conv2d_narrow_can_implement, conv2d_narrow));
  // Where the wgmma kernel applies it beat every mma.sync config measured, by 1.5-2x: its best-ranked tiles,
  // and of the others only the preferred config.
  const std::vector<Conv2dSm90Tile> tiles =
      conv2d_sm90_can_implement(p, ctx) ? conv2d_sm90_tiles(p, ctx) : std::vector<Conv2dSm90Tile>{};
  for (size_t i = 0; i < tiles.size() && i < kWgmmaCandidates; ++i) out.push_back(wgmma_candidate(p, tiles[i]));
  out.push_back(mma_candidate(preferred));
  if (tiles.empty() && preferred.kernel != Conv2dKernel::Direct) {
    const int k_tiles = (p.kh * p.kw * p.c_in + 31) / 32;
    for (Conv2dKernel k : {Conv2dKernel::Igemm64x64, Conv2dKernel::Igemm128x128, Conv2dKernel::Igemm128x160})
      for (int split : {1, 2, 4, 8}) {
        const Conv2dConfig cfg{k, split};
        if ((split == 1 || k_tiles >= 8 * split) && !(cfg.kernel == preferred.kernel && cfg.split_k == preferred.split_k))
          out.push_back(mma_candidate(cfg));
      }
  }
  if (preferred.kernel != Conv2dKernel::Direct) out.push_back(mma_candidate({Conv2dKernel::Direct, 1}));
#if RTVD_HAS_CUDNN
  out.push_back(cudnn_candidate(p, false));
  out.push_back(cudnn_candidate(p, true));
#endif
  return out;
}

void conv2d(const Conv2dParams& p, const CudaContext& ctx) {
  const std::vector<Conv2dCandidate> all = conv2d_candidates(p, ctx);
  default_candidate(all, p, ctx, KernelFamily::Custom, "conv2d").run(p, ctx, nullptr);
}

}  // namespace rtvd
