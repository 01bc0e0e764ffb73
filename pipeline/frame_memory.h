// A lower bound of the memory a frame plan takes, from the model's configs alone and in checked 64-bit
// arithmetic: checked before the graph is built (and before a large checkpoint has been read), so that a
// size that cannot fit is refused at once with the numbers.
#pragma once
#include <cstdint>
#include <string>

namespace rtvd {

struct Model;  // pipeline/models/model.h

struct FrameMemory {
  int64_t weights = 0;      // every conv kernel, matrix and embedding of the U-Net, the autoencoder and the
                            // ControlNets, in the activation type
  int64_t activations = 0;  // what is alive at once: the U-Net's at the bottom of its down path, at the sample's
                            // size (the frame's model input, the conditioning of every step, every skip
                            // connection; the ControlNets' residuals, control images and FiLM); the
                            // autoencoder's widest at the image's size; the frame's buffers
  int64_t workspace = 0;    // the autoencoder's mid-block attention's scratch (its scores, one chunk of queries
                            // at a time on the GPU: attention_gemm_chunks.h), beside the activations
  int64_t total() const;
  std::string describe() const;  // "weights 13.5 MiB, activations 20.3 GiB, workspace 264.0 MiB"
};

// width x height: the image; batch and steps: the U-Net's images per pass and the steps that run; act_bytes:
// the backend's activation size.
FrameMemory frame_memory(const Model& model, int width, int height, int batch, int steps, int act_bytes);

}  // namespace rtvd
