// The temporal feature cache (FrameSettings::cache_refresh): DeepCache across frames. Consecutive frames of
// a video differ little, and so do the U-Net's deep features. A full frame keeps, per denoise step, the
// feature that enters the U-Net's last up block; the frames between refreshes run the graph's cached frame,
// which recomputes the top level's blocks alone and takes the deeper levels' contribution from that feature.
#pragma once
#include <functional>
#include <vector>

#include "pipeline/frame_plan.h"
#include "pipeline/models/unet.h"

namespace rtvd {

// Emits plan.graph.cached_frame: the frame's ops in order, each step's models replaced by their cached forwards
// on the same model input: the ControlNets' top levels (cached_nets(i) emits step i's and returns their
// residuals) and the U-Net's (UNetBuilder::forward_cached), the ops after it reading its output. deep: each
// step's feature from UNetBuilder::forward, made persistent here (plan.feature_cache): the full frame writes it,
// the cached frames read it. cond, cross: the conditioning the full frame's U-Net passes read. Returns, per step,
// the cached U-Net pass's adds of the nets' residuals (UNetBuilder::residual_adds).
std::vector<std::vector<OpRange>> add_cached_frame(
    FramePlan& plan, UNetBuilder& unet, Ref model_in, const std::vector<StepConditioning>& cond,
    const CrossContext& cross, const std::vector<Ref>& deep,
    const std::function<std::vector<ControlResiduals>(int step)>& cached_nets);

}  // namespace rtvd
