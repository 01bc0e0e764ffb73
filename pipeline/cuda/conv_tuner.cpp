#include "conv_tuner.h"

#include <algorithm>
#include <cstdlib>

#include "pipeline/error.h"

namespace rtvd {
namespace {

constexpr size_t kWgmmaCandidates = 4;  // tiles timed, the best-ranked by conv2d_sm90_tiles()

}  // namespace

std::string ConvChoice::describe() const {
  if (cudnn) return "cuDNN";
  if (is_wgmma()) return cat("custom wgmma ", wgmma.name);
  std::string s = cat("custom ", conv2d_kernel_name(config.kernel));
  if (config.split_k > 1) s += cat(" split-k ", config.split_k);
  return s;
}

ConvChoice conv_choice_named(const std::string& name) {
  ConvChoice c;
  if (name == "cuDNN") {
    c.cudnn = true;
    return c;
  }
  const std::string wgmma = "custom wgmma ";
  if (name.rfind(wgmma, 0) == 0) {
    c.wgmma = conv2d_sm90_tile_named(name.substr(wgmma.size()));
    return c;
  }
  const std::string split = " split-k ";
  const size_t at = name.find(split);
  const std::string kernel = name.substr(0, at);
  c.config.split_k = at == std::string::npos ? 1 : std::atoi(name.c_str() + at + split.size());
  for (Conv2dKernel k : {Conv2dKernel::Direct, Conv2dKernel::Igemm64x64, Conv2dKernel::Igemm128x128, Conv2dKernel::Igemm128x160}) {
    c.config.kernel = k;
    if (kernel == cat("custom ", conv2d_kernel_name(k)) && c.config.split_k >= 1 && c.describe() == name) return c;
  }
  fail("unknown conv implementation '", name, "'");
}

std::string conv_shape_key(const Conv2dParams& p) {
  return cat(p.n, "x", p.h, "x", p.w, "x", p.c_in, " -> ", p.c_out, " k", p.kh, "x", p.kw, " s", p.stride, " p", p.pad,
             p.gn_stats ? cat(" gn", p.gn_groups) : std::string(), p.residual ? " res" : "",
             p.act == Activation::Silu ? " silu" : "", p.scale_batch_stride ? " film" : "");
}

ConvChoice default_custom_conv(const Conv2dParams& p, const CudaContext& ctx) {
  ConvChoice c;
  const std::vector<Conv2dSm90Tile> tiles = conv2d_sm90_tiles(p, ctx);
  if (!tiles.empty()) c.wgmma = tiles.front();
  else c.config = conv2d_choose_config(p, ctx);
  return c;
}

size_t custom_conv_workspace_bytes(const Conv2dParams& p, const ConvChoice& c) {
  return c.is_wgmma() ? conv2d_sm90_workspace_bytes(p, c.wgmma) : conv2d_workspace_bytes(p, c.config);
}

void run_custom_conv(const Conv2dParams& p, const ConvChoice& c, const CudaContext& ctx, const GroupNormParams* norm) {
  if (c.is_wgmma()) return conv2d_sm90(p, ctx, &c.wgmma, norm);
  if (norm) fail("conv2d: ", c.describe(), " applies the GroupNorm prologue as it loads: no norm to fuse");
  conv2d_with_config(p, c.config, ctx);
}

bool conv_takes_prepass(const Conv2dParams& p, const ConvChoice& c) {
  return p.gn_stats && (c.cudnn || c.is_wgmma());
}

std::vector<LayerCandidate> custom_conv_candidates(const Conv2dParams& p, const CudaContext& ctx) {
  std::vector<ConvChoice> choices = {default_custom_conv(p, ctx)};
  // Where the wgmma kernel applies it beat every mma.sync config measured, by 1.5-2x: its best-ranked
  // tiles, and of the others only the default config.
  const std::vector<Conv2dSm90Tile> tiles = conv2d_sm90_tiles(p, ctx);
  for (size_t i = 0; i < tiles.size() && i < kWgmmaCandidates; ++i) choices.push_back({false, {}, tiles[i]});
  const Conv2dConfig preferred = conv2d_choose_config(p, ctx);
  choices.push_back({false, preferred, {}});
  if (tiles.empty() && preferred.kernel != Conv2dKernel::Direct) {
    const int k_tiles = (p.kh * p.kw * p.c_in + 31) / 32;
    for (Conv2dKernel k : {Conv2dKernel::Igemm64x64, Conv2dKernel::Igemm128x128, Conv2dKernel::Igemm128x160})
      for (int split : {1, 2, 4, 8})
        if (split == 1 || k_tiles >= 8 * split) choices.push_back({false, {k, split}, {}});
  }
  std::vector<LayerCandidate> out;
  for (const ConvChoice& c : choices) {
    const std::string name = c.describe();
    if (std::any_of(out.begin(), out.end(), [&](const LayerCandidate& o) { return o.name == name; })) continue;
    LayerCandidate cand;
    cand.name = name;
    cand.workspace_bytes = custom_conv_workspace_bytes(p, c);
    cand.run = [p, c](const CudaContext& x) { run_custom_conv(p, c, x); };
    out.push_back(std::move(cand));
  }
  return out;
}

}  // namespace rtvd
