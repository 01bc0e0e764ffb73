#include "pipeline/graph/graph.h"

namespace rtvd {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Ref Graph::add_tensor(std::string name, Elem elem, std::vector<int64_t> shape, bool persistent) {
  tensors.push_back(TensorInfo{std::move(name), elem, std::move(shape), persistent});
  return Ref{Ref::Tensor, static_cast<int>(tensors.size()) - 1, 0};
}

const char* op_type_name(const OpBody& body) {
  static constexpr const char* kNames[] = {"conv2d", "group_norm", "layer_norm", "linear", "attention", "geglu",
                                           "silu", "upsample2x", "concat", "timestep_embedding", "embedding",
                                           "film", "cast", "guidance_step", "denoise_blend",
                                           "scale_activation", "similarity", "canny"};
  static_assert(std::size(kNames) == std::variant_size_v<OpBody>);
  return kNames[body.index()];
}

CannyOp canny_op(Graph& g, Ref x, Ref thresholds, Ref y, int n, int h, int w, int c) {
  CannyOp op;
  op.p.n = n, op.p.h = h, op.p.w = w, op.p.c = c;
  op.x = x, op.thresholds = thresholds, op.y = y;
  op.workspace = g.add_tensor("canny_workspace", Elem::U8, {int64_t(canny_workspace_bytes(op.p))});
  return op;
}

}  // namespace rtvd
