// rtvd render's and rtvd gui's ControlNet flags. Each --controlnet PATH[:SCALE] starts a net; the flags after it, up to the next
// --controlnet, are that net's, so that two nets read left to right on one line:
//   --controlnet canny_net:0.8 --control canny --canny 50:150  --controlnet depth_net --control depth.mp4
#pragma once
#include <vector>

#include "app/cli.h"

namespace rtvd::cli {

// --controlnet --control --canny --control-start --control-end --guess-mode, for a command's flag table.
const std::vector<FlagSpec>& controlnet_flags();

// The nets in the order given: each path into o.engine.model.controlnets, its settings into o.frame.controlnets
// and nets (with the source of its --control FILE); --guess-mode into o.frame.guess_mode. Errors name the flag:
// a net's flag before any --controlnet, a net without --control, --canny for a net whose control is not canny,
// values out of range, --skip-similar (read before) with a control that moves on its own.
void read_controlnet_flags(const Flags& flags, GenerationOptions& o, std::vector<ControlNetOption>& nets);

}  // namespace rtvd::cli
