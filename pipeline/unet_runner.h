// The bare U-Net as a callable: one forward pass for given inputs, on any backend. Used by the golden
// tests, the GPU-vs-CPU tests and `rtvd bench unet`.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/backends/backend.h"
#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"
#include "pipeline/laps.h"
#include "pipeline/model_files/model_config.h"

namespace rtvd {

class UNetRunner {
 public:
  // Builds and prepares the graph for flow time t (the same for every image of the batch).
  UNetRunner(const ModelConfig& cfg, WeightStore& weights, Backend& backend, int batch, int height, int width, float t);

  // x: (batch, height, width, in_channels); class_ids: (batch) when the model has classes;
  // context: (batch, context_length, cross_attention_dim) when it has cross-attention; text_embeds
  // (batch, text_embeds_dim()) and time_ids (batch, 6) when it has SDXL's added conditioning.
  void set_inputs(const std::vector<float>& x, const std::vector<int32_t>& class_ids, const std::vector<float>& context,
                  const std::vector<float>& text_embeds = {}, const std::vector<float>& time_ids = {});
  void forward();                   // frame ops only: what a benchmark times
  std::vector<float> output();      // (batch, height, width, out_channels) as float; waits for the forward
  const Graph& graph() const { return graph_; }

  // Milliseconds of each of `runs` forwards queued back to back: GPU time from events on the backend's
  // stream on the GPU, host time on the CPU.
  std::vector<double> time_forwards(int runs);

  // Arithmetic work of one forward (the frame ops) and of the per-plan setup (time embedding, FiLM,
  // cross-attention K/V), in FLOP.
  double forward_flops() const;
  double setup_flops() const;

  // Host seconds of the constructor's steps: build, upload, prepare.
  const Laps& load_times() const { return load_times_; }

 private:
  const ModelConfig& cfg_;
  Backend& backend_;
  Graph graph_;
  int batch_, height_, width_;
  Ref x_, class_ids_, context_, text_embeds_, time_ids_, v_;
  Laps load_times_;  // its clock starts as the object is made
};

}  // namespace rtvd
