// One frame of any model as a graph, in stages (docs/architecture.md, "One frame"):
//   encode     img2img: the source image to the sampler's latent (the autoencoder's encoder; nothing for a
//              pixel-space model, whose autoencoder is the identity)
//   start      x = start_noise_coef noise (+ start_latent_coef latent), the first model input  [noise: the host's walk]
//   condition  setup ops, run once per plan or prompt: the cross-attention K/V, each step's time embedding and FiLM
//   k steps    the models of the step on the same model input (the U-Net), then the sampler's linear update
//              x <- x_coef x + out_coef guided(out) (+ noise_coef noise_i: LCM, Euler ancestral) (pipeline/samplers/)
//   decode     the last latent to an image (nothing for the identity)
//   present    prev = blend(image, prev); rgba = to_rgba8(prev), one op; with nothing to decode, the last
//              step's update too (one pass: the default model's frame)
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/samplers/sampler_plan.h"
#include "pipeline/samplers/scheduler_config.h"

namespace rtvd {

struct Model;  // pipeline/models/model.h

// The largest guidance scale: the top of AUTOMATIC1111's CFG slider (SD models are used at about 1 to 15). Past
// it a frame only saturates; far past it a step overflows float and the frame is lost (--guidance 1e20).
constexpr float kMaxGuidance = 30.0f;
// The most denoising steps per frame (--steps, the GUI's slider, Engine::configure).
constexpr int kMaxSteps = 100;
// The most frames in flight (--stream-batch): each adds its share of the models' activations to a call and a
// frame of latency to every frame.
constexpr int kMaxStreamBatch = 16;
// The longest feature cache refresh period, in frames (--feature-cache).
constexpr int kMaxCacheRefresh = 100;
// The feature cache's refresh on a source change (--cache-similarity). The measure (similarity_filter.h) is
// 0.992 to 0.997 for a 32x32 patch moving a pixel in 512x512, and near 0 at a cut between unrelated pictures:
// 0.9 refreshes at cuts and fast motion, not at every small move (the period takes care of drift).
constexpr float kDefaultCacheSimilarity = 0.9f;

// Where a ControlNet's control image comes from, every frame.
enum class ControlPreprocessor {
  Image,   // the host's image (FramePlan::control_images): a file, a video, a webcam
  Source,  // the frame's source image itself (img2img), for tile and identity ControlNets
  Canny,   // Canny edges of the frame's source image (img2img), on the device (kernels/canny)
};

// A ControlNet's part in the frame (Model::controlnets, by index): diffusers' controlnet_conditioning_scale and
// control_guidance_start / _end, the fractions of the steps that run between which the net is applied, and its
// control image.
struct ControlNetSettings {
  float scale = 1.0f;
  double start = 0.0, end = 1.0;  // 0 <= start < end <= 1, compared with i / n as diffusers does
  ControlPreprocessor preprocessor = ControlPreprocessor::Image;
  int canny_low = 100, canny_high = 200;  // cv::Canny's thresholds (the canny annotator's defaults)
  bool operator==(const ControlNetSettings&) const = default;
};

// Whether the net runs at step i of n: diffusers' controlnet_keep, 1 - (i/n < start or (i+1)/n > end).
bool controlnet_runs(const ControlNetSettings& s, int i, int n);

struct FrameSettings {
  uint64_t seed = 0;
  int steps = 4;           // 1 to kMaxSteps
  float guidance = 3.0f;   // the sampler's GuidanceRule: without guidance the batch shrinks to the conditional image
  float strength = 0.6f;   // img2img: how far into the noise the source image is pushed
  float blend = 0.5f;      // weight of the previous frame
  int class_id = 0;        // for class-conditional models
  int noise_period = 24;   // frames between key noises of the walk
  // The feature cache (pipeline/cached_frame.h): a full frame every cache_refresh frames, the U-Net's deep
  // levels cached from it in the frames between; 0 = off (every frame full), 0 to kMaxCacheRefresh.
  int cache_refresh = 0;
  // With the cache and a source image: a full frame also whenever the source's similarity (the similarity
  // filter's measure) to the last full frame's source falls below this; 0 = the period alone, 0 to 1.
  float cache_similarity = kDefaultCacheSimilarity;
  std::optional<SamplerKind> sampler;  // models with a scheduler: nullopt = the scheduler's own
  int stream_batch = 1;    // frames in flight (throughput mode), 1 or a multiple of steps up to kMaxStreamBatch
  float skip_similar = 0;  // img2img: 0 = off, else a frame whose source is at least this similar to the last
                           // processed one is skipped (pipeline/similarity_filter.h), in (0, 1]
  // Per ControlNet of the model (a net past the end: the defaults), and diffusers' guess_mode: residuals scaled
  // from 0.1 (conv_in's) to 1 (the mid block's), and with guidance the unconditional half gets none.
  std::vector<ControlNetSettings> controlnets;
  bool guess_mode = false;
  bool operator==(const FrameSettings&) const = default;
};

// Refuses ControlNet settings that no frame of the model can run, naming the flag: a scale that is not finite,
// a start or end outside [0, 1], a start not before its end, a preprocessor of the source without one (img2img
// false); with nets, a stream batch of frames of more than one step (`steps`: the sampler's that run), whose frames
// in flight sit at different steps and would need the control images of the frames before theirs.
void check_controlnet_settings(const Model& model, const FrameSettings& s, bool img2img, int steps);

// One denoise step. Every model of the step reads the same model input (the latents, over the batch
// [cond | uncond]) and runs in this order; the sampler's update reads the last one's output: the ControlNets that
// run at this step, each a branch of the graph (Graph::branches) that makes its own residuals, then the U-Net,
// which adds them.
struct DenoiseStage {
  std::vector<OpRange> models;  // frame ops of each model: the nets', then the U-Net's (the last)
  OpRange update;               // frame ops: the sampler's step; the last step's is present's op when fused
};

// The frame's stages as the builder emitted them (the header above). A stream batch has one DenoiseStage: its
// models run once per call over every frame in flight, its update holds each slot's step, from the last slot
// down (the last one's presents first when they are fused). The feature cache's cached frame
// (graph.cached_frame) has no stages of its own: it is these with each step's U-Net pass replaced
// (pipeline/cached_frame.h).
struct FrameStages {
  OpRange condition;  // setup ops
  OpRange encode;     // frame ops, from here on: the control images to activations, the source image to the
                      // latent; empty for txt2img without ControlNets and the identity autoencoder
  OpRange start;
  std::vector<DenoiseStage> steps;
  OpRange decode;     // empty for the identity autoencoder
  OpRange present;    // one DenoiseBlendOp per frame that leaves the call
};

// Stream batching (throughput mode, FrameSettings::stream_batch = K > 1): K frames in flight, in `slots` =
// steps groups of `group` = K / steps frames; the group in slot j is at step j, and one call of the models
// advances every group by one step. Each call a new group enters (their noise, and their source images for
// img2img) and the group in the last slot leaves, its frames decoded and presented in order. A frame leaves
// K - 1 - (its place in its group) frames after it entered; shown at a steady K - 1 frames of latency. With
// K = 1 the frame's steps run one after the other, each its own call of the models.
struct FramePlan {
  Graph graph;
  FrameStages stages;
  SamplerPlan sampler;         // the steps the frame runs
  int batch = 2;               // images per call of the models: slots x halves x group
  int halves = 2;              // [cond | uncond] with guidance: 2, else 1
  int stream = 1;              // frames in flight: K
  int group = 1;               // frames that enter and leave per call
  int width = 0, height = 0;   // the image
  int latent_width = 0, latent_height = 0;  // the sample's: the image's over the autoencoder's pixels_per_latent
  // The inputs, written by the host every call:
  Ref sample;                  // (slots x group, latent_height, latent_width, C) fp32: slot 0's group gets its noise
                               // walk from the host, then each slot holds its frames' x
  Ref image;                   // img2img: the source images (group, height, width, image channels) fp32
  // Per ControlNet of the model, with ControlPreprocessor::Image: its control image (group, height, width, 3)
  // fp32 in [-1, 1], as sources come (the frame maps it to [0, 1]); none for the others.
  std::vector<Ref> control_images;
  // Per ControlNet, with ControlPreprocessor::Canny: its thresholds (2) int32, low and high, which the host
  // writes when they change (no new plan); none for the others.
  std::vector<Ref> canny_thresholds;
  // Per ControlNet, the control image its net reads: (net batch, height, width, its conditioning channels) in
  // [0, 1] (the Canny edges, the source or its own image), for a view of it.
  std::vector<Ref> control_activations;
  // Per ControlNet, its residuals' scaling ops in both frame lists (ControlNetBuilder::scaled_ops): a new scale is
  // set in them in place (in_scale = scale x factor), with no new plan.
  struct ScaledOp {
    FrameOps list;
    size_t op;
    float factor;
  };
  std::vector<std::vector<ScaledOp>> controlnet_scaled_ops;
  // Per ControlNet, the ops it costs in both frame lists: each of its forwards (with guess mode's padding of its
  // residuals) and the U-Net's adds of its residuals, in place into the skips (UNetBuilder::residual_adds). At scale
  // 0 they are off (Op::off, set_controlnet_scale): the net does not run, and the U-Net reads its skips as the model
  // without the net has them. Its control image's ops (encode) stay on, for a view of it (control_activations).
  struct ListOps {
    FrameOps list;
    OpRange ops;
  };
  std::vector<std::vector<ListOps>> controlnet_ops;
  Ref noise;                   // fresh noise of the steps in noise_steps, one (group, ...) sample each (LCM, Euler
                               // ancestral): for the frames at that step
  std::vector<int> noise_steps;
  // Written when the settings or the prompt change:
  Ref class_ids, context;      // per slot: [cond x group | uncond x group]
  // SDXL's added conditioning (text_time U-Nets), per slot as the context: the pooled text embedding
  // (batch, text_embeds_dim) and the time ids (batch, 6) fp32 (sdxl_time_ids).
  Ref text_embeds, time_ids;
  // The blend history and the output:
  Ref prev, rgba;              // rgba: per frame of the group, frame_bytes(): its pixels, then its flag
  Ref nonfinite;               // the first frame's flag (denoise_blend's): right after its pixels, in the same tensor
  // With the feature cache: per step, the deep feature that the full frame writes and the cached frame
  // (graph.cached_frame) reads (pipeline/cached_frame.h); empty without.
  std::vector<Ref> feature_cache;

  bool pipelined() const { return stream > 1; }
  int slots() const { return pipelined() ? int(sampler.steps.size()) : 1; }
  int latency() const { return stream - 1; }  // frames from a source to its output
  int64_t pixel_bytes() const { return int64_t(width) * height * 4; }
  int64_t frame_bytes() const { return pixel_bytes() + int64_t(sizeof(int32_t)); }
  // The first frame's present (its blend's `first` flag starts a sequence).
  DenoiseBlendOp& present_op() { return std::get<DenoiseBlendOp>(graph.frame[stages.present.begin].body); }
};

// ControlNet k's scale set in the plan's ops in place, with no new plan: in its scaling ops (controlnet_scaled_ops),
// and its ops (controlnet_ops) off at scale 0, on at any other. Whether an op changed (what a backend recorded from
// them is made again then: Backend::ops_changed).
bool set_controlnet_scale(FramePlan& plan, size_t k, float scale);

// Refuses a stream batch the plan cannot run, naming --stream-batch: 1 to kMaxStreamBatch, and past 1 a
// multiple of the steps.
void check_stream_batch(int stream_batch, int steps);

// The frames' output as one persistent tensor, so that one copy takes a frame's pixels and flag to the host:
// per frame of the group, the RGBA8 pixels (height, width, 4), then the int32 flag that the frame's
// denoise_blend sets when a value of the frame is NaN or Inf. Sets plan.rgba and plan.nonfinite (plan.width,
// plan.height and plan.group first).
void add_frame_output(FramePlan& plan);

// The time ids of an SDXL frame of width x height, as diffusers' StableDiffusionXLPipeline and
// StableDiffusionXLImg2ImgPipeline make them by default (_get_add_time_ids): the original size, the crop's top
// left corner and the target size, (height, width, 0, 0, height, width).
std::vector<float> sdxl_time_ids(int width, int height);

// The sampler the model runs at these settings: rectified flow's Euler for a model without a scheduler (rtvd's
// pixel-space models), else the DDPM sampler that s.sampler picks from the scheduler. Throws for settings the
// sampler cannot run (a strength that leaves no step), naming --steps or --strength.
SamplerPlan frame_sampler(const Model& model, const FrameSettings& s, bool img2img);

// The frame for the sampler's steps. width x height: the image, a multiple of the model's size_multiple().
// Emits every weight of the model but the encoder's for txt2img.
FramePlan build_frame_plan(const Model& model, const SamplerPlan& sampler, const FrameSettings& s, bool img2img,
                           int width, int height, int act_bytes);

}  // namespace rtvd
