// The GUI's CUDA side: the interop upload and the GPU memory query. The only file of app/gui/ that
// includes CUDA; without CUDA in the build it says so.
#include "app/gui/frame_upload.h"
#include "build_config.h"

#if RTVD_HAS_CUDA
#include "app/gui/gl.h"
// After gl.h: it includes <GL/gl.h> itself.
#include <cuda_gl_interop.h>

#include "pipeline/backends/cuda/cuda_host.h"  // RTVD_CUDA_CHECK
#endif

namespace rtvd::gui {

#if RTVD_HAS_CUDA

namespace {

// The texture is registered once; each frame maps it on the engine's stream, copies the RGBA8 rows into
// its array and unmaps it, which orders the copy before GL's later use of the texture.
class InteropUpload final : public FrameUpload {
 public:
  explicit InteropUpload(Presenter& presenter) : width_(presenter.width()), height_(presenter.height()) {
    RTVD_CUDA_CHECK(cudaGraphicsGLRegisterImage(&resource_, presenter.texture(), GL_TEXTURE_2D,
                                                cudaGraphicsRegisterFlagsWriteDiscard));
    RTVD_CUDA_CHECK(cudaEventCreate(&start_));
    RTVD_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~InteropUpload() override {
    cudaGraphicsUnregisterResource(resource_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  double gpu_ms() const override { return timed_ ? ms_sum_ / timed_ : 0; }

  std::string name() const override { return "CUDA-GL interop (cudaMemcpy2DToArrayAsync into the texture)"; }

  void upload(Engine& engine) override {
    const Backend::DeviceView view = engine.device_image();
    auto* stream = static_cast<cudaStream_t>(view.stream);
    // The previous upload's time, if it has finished (the display path's cost, for the exit line).
    if (recorded_ && cudaEventQuery(stop_) == cudaSuccess) {
      float ms = 0;
      RTVD_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      ms_sum_ += ms;
      ++timed_;
      recorded_ = false;
    }
    const bool record = !recorded_;
    if (record) RTVD_CUDA_CHECK(cudaEventRecord(start_, stream));
    RTVD_CUDA_CHECK(cudaGraphicsMapResources(1, &resource_, stream));
    cudaArray_t array = nullptr;
    const size_t row = size_t(width_) * 4;
    cudaError_t e = cudaGraphicsSubResourceGetMappedArray(&array, resource_, 0, 0);
    if (e == cudaSuccess)
      e = cudaMemcpy2DToArrayAsync(array, 0, 0, view.data, row, row, height_, cudaMemcpyDeviceToDevice, stream);
    const cudaError_t unmapped = cudaGraphicsUnmapResources(1, &resource_, stream);  // also after a failed copy
    RTVD_CUDA_CHECK(e);
    RTVD_CUDA_CHECK(unmapped);
    if (record) RTVD_CUDA_CHECK(cudaEventRecord(stop_, stream)), recorded_ = true;
  }

 private:
  int width_, height_;
  cudaGraphicsResource_t resource_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool recorded_ = false;
  double ms_sum_ = 0;
  int timed_ = 0;
};

}  // namespace

std::unique_ptr<FrameUpload> make_interop_upload(Presenter& presenter, Engine& engine, std::string* why_not) {
  if (!engine.device_image().data) {
    *why_not = "the engine runs on the CPU";
    return nullptr;
  }
  try {
    return std::make_unique<InteropUpload>(presenter);
  } catch (const Error& e) {
    *why_not = cat("the driver refused the GL texture (", e.what(), ")");
    return nullptr;
  }
}

std::optional<std::pair<size_t, size_t>> gpu_memory(Engine& engine) {
  if (!engine.backend().is_cuda()) return std::nullopt;
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
  return std::make_pair(total - free, total);
}

#else

std::unique_ptr<FrameUpload> make_interop_upload(Presenter&, Engine&, std::string* why_not) {
  *why_not = "this build has no CUDA";
  return nullptr;
}

std::optional<std::pair<size_t, size_t>> gpu_memory(Engine&) { return std::nullopt; }

#endif

}  // namespace rtvd::gui
