#include "app/gui/frame_upload.h"

namespace rtvd::gui {

namespace {

class HostUpload final : public FrameUpload {
 public:
  explicit HostUpload(Presenter& presenter) : presenter_(presenter) {}
  std::string name() const override { return "host upload (read back, glTexSubImage2D)"; }
  void upload(Engine& engine) override { presenter_.upload(engine.image()); }

 private:
  Presenter& presenter_;
};

}  // namespace

std::unique_ptr<FrameUpload> make_host_upload(Presenter& presenter) { return std::make_unique<HostUpload>(presenter); }

}  // namespace rtvd::gui
