// One frame as a graph: rectified-flow Euler sampling with classifier-free guidance.
//   sample x (t = strength): noise, or (1 - s) image + s noise for img2img   [written by the host]
//   k steps: v = U-Net(x, t_i) over the batch [cond | uncond]; x -= (t_i - t_{i+1}) * guided(v)
//   the last step fused with prev = blend(x, prev) and rgba = to_rgba8(prev) (denoise_blend)
// The per-step time embeddings and FiLM depend only on the settings: they are setup ops, run once per plan.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/samplers/scheduler_config.h"

namespace rtvd {

// The largest guidance scale: the top of AUTOMATIC1111's CFG slider (SD models are used at about 1 to 15). Past
// it a frame only saturates; far past it a step overflows float and the frame is lost (--guidance 1e20).
constexpr float kMaxGuidance = 30.0f;

struct FrameSettings {
  uint64_t seed = 0;
  int steps = 4;
  float guidance = 3.0f;   // frame_batch: without guidance the batch shrinks to the conditional image
  float strength = 0.6f;   // img2img: how far into the noise the source image is pushed
  float blend = 0.5f;      // weight of the previous frame
  int class_id = 0;        // for class-conditional models
  int noise_period = 24;   // frames between key noises of the walk
  std::optional<SamplerKind> sampler;  // latent models: nullopt = the checkpoint's scheduler's own
  bool operator==(const FrameSettings&) const = default;
};

struct FramePlan {
  Graph graph;
  int batch = 2, width = 0, height = 0;  // width x height: the image
  int latent_width = 0, latent_height = 0;  // latent models: the sample's size; 0 for pixel models
  float start_t = 1.0f;        // pixel models: flow time of the initial sample
  std::vector<float> times;    // pixel models: t_0 > t_1 > ... > t_k = 0
  Ref sample, prev, rgba, class_ids, context;
  Ref nonfinite;               // the frame's flag (denoise_blend's): right after rgba's pixels, in the same tensor
  Ref image;                   // latent img2img: the source image (1, height, width, 3) fp32, written by the host
  Ref noise;                   // latent models: fresh noise of the steps in noise_steps, one sample each
  std::vector<int> noise_steps;
  size_t blend_op = 0;         // index of the frame's denoise_blend in graph.frame (`first` is per frame)
  bool latent() const { return latent_width > 0; }
};

// Images per U-Net pass: 2 (conditional and unconditional) with guidance, 1 without. Latent models follow
// diffusers' Stable Diffusion pipelines: guidance only above 1 (0 and 1 run the conditional half alone, the
// real-time case of SD-Turbo and LCM); rtvd's flow models use every value but 1 (below 1 it leans towards the
// unconditional image).
int frame_batch(const FrameSettings& s, bool latent);

// A lower bound of the memory a plan takes on a backend whose activations are act_bytes wide, from the
// config alone and in checked 64-bit arithmetic: checked before the graph is built, so that a size that
// cannot fit is refused at once with the numbers.
struct FrameMemory {
  int64_t weights = 0;      // every conv kernel, matrix and embedding, in the activation type
  int64_t activations = 0;  // what is alive at once at the bottom of the U-Net: the frame's inputs and outputs,
                            // the conditioning of every step, and every skip connection of the down path
  int64_t total() const;
  std::string describe() const;  // "weights 13.5 MiB, activations 20.3 GiB"
};
FrameMemory frame_memory(const ModelConfig& cfg, int width, int height, int batch, int steps, int act_bytes);

// The frame's output as one persistent tensor, so that one copy takes both to the host: the RGBA8 pixels
// (height, width, 4), then the int32 flag that the frame's denoise_blend sets when a value of the frame is
// NaN or Inf. Sets plan.rgba and plan.nonfinite (plan.width and plan.height first).
void add_frame_output(FramePlan& plan);

// Flow times of a k-step schedule from t = start down to 0, evenly spaced.
std::vector<float> flow_schedule(int steps, float start);

FramePlan build_frame_plan(const ModelConfig& cfg, WeightStore& weights, const FrameSettings& s, bool img2img,
                           int width, int height, int act_bytes);

}  // namespace rtvd
