#include "conv_tuner.h"

#include <cstdlib>

#include "pipeline/error.h"

namespace rtvd {

std::string ConvChoice::describe() const {
  if (cudnn) return "cuDNN";
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

std::vector<LayerCandidate> custom_conv_candidates(const Conv2dParams& p, const CudaContext& ctx) {
  const Conv2dConfig preferred = conv2d_choose_config(p, ctx);
  std::vector<Conv2dConfig> configs = {preferred};
  if (preferred.kernel != Conv2dKernel::Direct) {
    const int k_tiles = (p.kh * p.kw * p.c_in + 31) / 32;
    for (Conv2dKernel k : {Conv2dKernel::Igemm64x64, Conv2dKernel::Igemm128x128, Conv2dKernel::Igemm128x160})
      for (int split : {1, 2, 4, 8})
        if (split == 1 || k_tiles >= 8 * split) configs.push_back({k, split});
  }
  std::vector<LayerCandidate> out;
  for (size_t i = 0; i < configs.size(); ++i) {
    const Conv2dConfig c = configs[i];
    if (i > 0 && c.kernel == preferred.kernel && c.split_k == preferred.split_k) continue;
    LayerCandidate cand;
    cand.name = ConvChoice{false, c}.describe();
    cand.workspace_bytes = conv2d_workspace_bytes(p, c);
    cand.run = [p, c](const CudaContext& x) { conv2d_with_config(p, c, x); };
    out.push_back(std::move(cand));
  }
  return out;
}

}  // namespace rtvd
