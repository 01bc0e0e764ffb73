#include "unet_runner.h"

#include <chrono>

#include "base/error.h"
#include "device.h"
#include "pipeline/models/unet.h"

namespace rtvd {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double sum_flops(const std::vector<Op>& ops) {
  double f = 0;
  for (const Op& op : ops) f += op.flops;
  return f;
}

}  // namespace

UNetRunner::UNetRunner(const ModelConfig& cfg, WeightStore& weights, Backend& backend, int batch, int height, int width,
                       float t)
    : cfg_(cfg), backend_(backend), batch_(batch), height_(height), width_(width) {
  x_ = graph_.add_tensor("x", Elem::Act, {batch, height, width, cfg.in_channels}, true);
  if (cfg.num_class_embeds > 0) class_ids_ = graph_.add_tensor("class_ids", Elem::I32, {batch}, true);
  if (cfg.cross_attention_dim > 0)
    context_ = graph_.add_tensor("context", Elem::Act, {batch, cfg.context_length, cfg.cross_attention_dim}, true);
  UNetBuilder unet(cfg, weights, graph_, batch, int(backend.act_bytes()));
  Ref added;
  if (cfg.text_time()) {
    text_embeds_ = graph_.add_tensor("text_embeds", Elem::Act, {batch, cfg.text_embeds_dim()}, true);
    time_ids_ = graph_.add_tensor("time_ids", Elem::F32, {batch, ModelConfig::kTimeIds}, true);
    added = unet.added_embedding(text_embeds_, time_ids_);
  }
  const CrossContext cross = unet.cross_context(context_);
  const StepConditioning cond = unet.conditioning(t, class_ids_, "step0", added);
  v_ = unet.forward(x_, height, width, cond, cross, "step0");
  graph_.tensors[v_.id].persistent = true;  // read after the run
  load_times_.lap("build");
  backend_.upload_weights(weights);
  load_times_.lap("upload");
  backend_.prepare(graph_);
  load_times_.lap("prepare");
}

void UNetRunner::set_inputs(const std::vector<float>& x, const std::vector<int32_t>& class_ids,
                            const std::vector<float>& context, const std::vector<float>& text_embeds,
                            const std::vector<float>& time_ids) {
  const size_t nx = size_t(batch_) * height_ * width_ * cfg_.in_channels;
  if (x.size() != nx) fail("unet input x: expected ", nx, " values, got ", x.size());
  backend_.write(x_, x.data(), nx);
  if (class_ids_) {
    if (class_ids.size() != size_t(batch_)) fail("unet input class_ids: expected ", batch_, " ids, got ", class_ids.size());
    for (int32_t id : class_ids)
      if (id < 0 || id >= cfg_.num_class_embeds) fail("unet input class_ids: id ", id, " out of range");
    backend_.write(class_ids_, class_ids.data(), class_ids.size());
  }
  if (context_) {
    const size_t nc = size_t(batch_) * cfg_.context_length * cfg_.cross_attention_dim;
    if (context.size() != nc) fail("unet input context: expected ", nc, " values, got ", context.size());
    backend_.write(context_, context.data(), nc);
  }
  if (text_embeds_) {
    const size_t nt = size_t(batch_) * cfg_.text_embeds_dim(), ni = size_t(batch_) * ModelConfig::kTimeIds;
    if (text_embeds.size() != nt) fail("unet input text_embeds: expected ", nt, " values, got ", text_embeds.size());
    if (time_ids.size() != ni) fail("unet input time_ids: expected ", ni, " values, got ", time_ids.size());
    backend_.write(text_embeds_, text_embeds.data(), nt);
    backend_.write(time_ids_, time_ids.data(), ni);
  }
  backend_.run_setup();
}

void UNetRunner::forward() { backend_.run_frame(); }

std::vector<double> UNetRunner::time_forwards(int runs) {
  if (backend_.is_cuda()) return cuda_event_times_ms(backend_.device_view(v_).stream, runs, [&] { forward(); });
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    forward();
    ms.push_back(1e3 * seconds_since(start));
  }
  return ms;
}

double UNetRunner::forward_flops() const { return sum_flops(graph_.frame); }
double UNetRunner::setup_flops() const { return sum_flops(graph_.setup); }

std::vector<float> UNetRunner::output() {
  std::vector<float> v(size_t(batch_) * height_ * width_ * cfg_.out_channels);
  backend_.read(v_, v.data(), v.size());
  return v;
}

}  // namespace rtvd
