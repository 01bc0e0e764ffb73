#include "pipeline/cached_frame.h"

#include <map>

#include "base/error.h"

namespace rtvd {

std::vector<std::vector<OpRange>> add_cached_frame(
    FramePlan& plan, UNetBuilder& unet, Ref model_in, const std::vector<StepConditioning>& cond,
    const CrossContext& cross, const std::vector<Ref>& deep,
    const std::function<std::vector<ControlResiduals>(int step)>& cached_nets) {
  Graph& g = plan.graph;
  std::map<int, int> outputs;  // a full U-Net pass's output tensor -> its cached pass's
  size_t next = 0;             // the next frame op to copy
  std::vector<std::vector<OpRange>> residual_adds;
  const auto copy_until = [&](size_t end) {
    for (; next < end; ++next) {
      Op op = g.frame[next];
      std::visit([&](auto& body) {
        body.refs([&](Ref& r, auto&) {
          if (const auto o = outputs.find(r.id); r.kind == Ref::Tensor && o != outputs.end()) r.id = o->second;
        });
      }, op.body);
      g.cached_frame.push_back(std::move(op));
    }
  };
  for (size_t i = 0; i < plan.stages.steps.size(); ++i) {
    const std::vector<OpRange>& models = plan.stages.steps[i].models;  // the nets', then the U-Net's
    const auto* conv_out = std::get_if<ConvOp>(&g.frame.at(models.back().end - 1).body);  // the pass's last op
    if (!conv_out) fail("internal: step ", i, "'s U-Net pass does not end in conv_out");
    copy_until(models.front().begin);
    g.tensors[deep[i].id].persistent = true;  // written by the full frame, read by the cached frames after it
    plan.feature_cache.push_back(deep[i]);
    const std::vector<ControlResiduals> residuals = cached_nets(int(i));
    const Ref out = unet.forward_cached(model_in, deep[i], plan.latent_height, plan.latent_width, cond[i], cross,
                                        cat("step", i, ".cached"), residuals);  // (batch, h, w, out_channels)
    outputs[conv_out->y.id] = out.id;
    residual_adds.push_back(unet.residual_adds());
    next = models.back().end;
  }
  copy_until(g.frame.size());
  return residual_adds;
}

}  // namespace rtvd
