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
                                           "scale_activation", "similarity"};
  static_assert(std::size(kNames) == std::variant_size_v<OpBody>);
  return kNames[body.index()];
}

}  // namespace rtvd
