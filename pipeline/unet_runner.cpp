#include "unet_runner.h"

#include "error.h"
#include "unet.h"

namespace rtvd {

UNetRunner::UNetRunner(const ModelConfig& cfg, WeightStore& weights, Backend& backend, int batch, int height, int width,
                       float t)
    : cfg_(cfg), backend_(backend), batch_(batch), height_(height), width_(width) {
  x_ = graph_.add_tensor("x", Elem::Act, {batch, height, width, cfg.in_channels}, true);
  if (cfg.num_class_embeds > 0) class_ids_ = graph_.add_tensor("class_ids", Elem::I32, {batch}, true);
  if (cfg.cross_attention_dim > 0)
    context_ = graph_.add_tensor("context", Elem::Act, {batch, cfg.context_length, cfg.cross_attention_dim}, true);
  UNetBuilder unet(cfg, weights, graph_, batch, int(backend.act_bytes()));
  const CrossContext cross = unet.cross_context(context_);
  const StepConditioning cond = unet.conditioning(t, class_ids_, "step0");
  v_ = unet.forward(x_, height, width, cond, cross, "step0");
  graph_.tensors[v_.id].persistent = true;  // read after the run
  backend_.upload_weights(weights);
  backend_.prepare(graph_);
}

void UNetRunner::set_inputs(const std::vector<float>& x, const std::vector<int32_t>& class_ids,
                            const std::vector<float>& context) {
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
  backend_.run_setup();
}

void UNetRunner::forward() { backend_.run_frame(); }

std::vector<float> UNetRunner::output() {
  std::vector<float> v(size_t(batch_) * height_ * width_ * cfg_.out_channels);
  backend_.read(v_, v.data(), v.size());
  return v;
}

}  // namespace rtvd
