#include "app/common/control_sources.h"

#include "base/error.h"

namespace rtvd {

namespace {

std::string spec_text(const SourceSpec& s) {
  return s.kind == SourceKind::Webcam ? cat("webcam:", s.webcam) : s.path;
}

}  // namespace

ControlSources::ControlSources(const std::vector<cli::ControlNetOption>& nets, int width, int height, int frames,
                               std::vector<std::string>& notes)
    : width_(width), height_(height), loop_(frames == 0) {
  for (size_t k = 0; k < nets.size(); ++k) {
    if (!nets[k].control) continue;
    const std::string flag = "--control " + spec_text(*nets[k].control);
    std::unique_ptr<FrameSource> source = open_source(*nets[k].control);
    if (source->frame_count() > 0 && source->frame_count() < frames)
      fail(flag, ": the control video has ", source->frame_count(), " frames, the run ", frames,
           ": give a longer video or --frames ", source->frame_count());
    if (source->width() != width || source->height() != height)
      notes.push_back(cat("note: ", flag, " is ", source->width(), "x", source->height(), ": its frames are cropped "
                          "to the frame's aspect ratio and resized to ", width, "x", height));
    nets_.push_back({k, flag, std::move(source)});
  }
}

void ControlSources::next(Engine& engine) {
  for (Net& net : nets_) {
    bool got = net.source->next(width_, height_, rgb_);
    if (!got && loop_) {
      net.source->rewind();
      got = net.source->next(width_, height_, rgb_);
    }
    if (!got) fail(net.flag, ": the control video ended after ", frame_, " frames, before the run did");
    engine.set_control_image(net.index, rgb_);
  }
  ++frame_;
}

}  // namespace rtvd
