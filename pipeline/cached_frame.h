// The temporal feature cache (FrameSettings::cache_refresh): DeepCache across frames. Consecutive frames of
// a video differ little, and so do the U-Net's deep features. A full frame keeps, per denoise step, the
// feature that enters the U-Net's last up block; the frames between refreshes run the graph's cached frame,
// which recomputes the top level's blocks alone and takes the deeper levels' contribution from that feature.
#pragma once
#include <vector>

#include "pipeline/frame_plan.h"
#include "pipeline/models/unet.h"

namespace rtvd {

// Emits plan.graph.cached_frame: the frame's ops in order, each step's U-Net pass replaced by its cached
// forward (UNetBuilder::forward_cached) on the same model input, the ops after it reading its output. deep:
// each step's feature from UNetBuilder::forward, made persistent here (plan.feature_cache): the full frame
// writes it, the cached frames read it. cond, cross: the conditioning the full frame's U-Net passes read.
void add_cached_frame(FramePlan& plan, UNetBuilder& unet, Ref model_in, const std::vector<StepConditioning>& cond,
                      const CrossContext& cross, const std::vector<Ref>& deep);

}  // namespace rtvd
