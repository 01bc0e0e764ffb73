// rtvd render's and rtvd gui's ControlNet control images from files (--control FILE, video:PATH, webcam[:N]): one FrameSource
// per such net, read in step with the frames and fitted to the frame as --source is.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/common/controlnet_option.h"
#include "pipeline/engine.h"
#include "pipeline/io/source.h"

namespace rtvd {

class ControlSources {
 public:
  // Opens the source of each net with one. Refuses a video with fewer frames than the run's (one line naming
  // the file and both counts); frames 0: a run without a set length (the GUI's), whose control videos loop.
  // notes: one line per source whose frames are not width x height, which are fitted.
  ControlSources(const std::vector<cli::ControlNetOption>& nets, int width, int height, int frames,
                 std::vector<std::string>& notes);
  // Each source's next frame, to the engine as its net's control image; an Error naming the file when one ends
  // before the run.
  void next(Engine& engine);

 private:
  struct Net {
    size_t index;  // of the net
    std::string flag;  // "--control PATH" as given
    std::unique_ptr<FrameSource> source;
  };
  std::vector<Net> nets_;
  int width_, height_, frame_ = 0;
  bool loop_;
  std::vector<float> rgb_;
};

}  // namespace rtvd
