// How the engine's frame reaches the presenter's texture: CUDA-OpenGL interop (a device-to-texture copy
// on the engine's stream, no host round trip) or a host upload (read back, glTexSubImage2D). The loop
// falls back to the host upload when interop is unavailable or fails.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "app/gui/presenter.h"
#include "pipeline/engine.h"

namespace rtvd::gui {

class FrameUpload {
 public:
  virtual ~FrameUpload() = default;
  virtual std::string name() const = 0;     // the display path, as the overlay and the exit line say it
  virtual void upload(Engine& engine) = 0;  // the engine's last frame into the texture; Error on failure
  // Mean GPU ms of the uploads measured so far (read a frame late, never waited for); 0 where the GPU
  // does no part of it.
  virtual double gpu_ms() const { return 0; }
};

std::unique_ptr<FrameUpload> make_host_upload(Presenter& presenter);

// Interop when the build has CUDA, the engine runs on it and the driver registers the texture (it will
// not for a GL that is not on the engine's GPU, e.g. Mesa); otherwise null with the reason in why_not.
std::unique_ptr<FrameUpload> make_interop_upload(Presenter& presenter, Engine& engine, std::string* why_not);

// (used, total) bytes of the engine's GPU, all processes; nullopt on the CPU backend.
std::optional<std::pair<size_t, size_t>> gpu_memory(Engine& engine);

}  // namespace rtvd::gui
