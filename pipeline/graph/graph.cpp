#include "pipeline/graph/graph.h"

#include <algorithm>
#include <cstdint>

#include "base/error.h"

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

void join_branches(Graph& g) {
  // First frame op touching each tensor.
  std::vector<size_t> first(g.tensors.size(), SIZE_MAX);
  const auto each_tensor = [](Op& op, auto&& f) {
    std::visit([&](auto& body) { body.refs([&](const Ref& r, auto&) { if (r.kind == Ref::Tensor) f(r.id); }); }, op.body);
  };
  for (size_t i = 0; i < g.frame.size(); ++i) each_tensor(g.frame[i], [&](int id) { first[size_t(id)] = std::min(first[size_t(id)], i); });
  for (Branch& b : g.branches) {
    if (b.begin >= b.end || b.end > g.frame.size()) fail("internal: branch [", b.begin, ", ", b.end, ") of ", g.frame.size(), " frame ops");
    std::vector<bool> made(g.tensors.size(), false);
    for (size_t i = b.begin; i < b.end; ++i)
      each_tensor(g.frame[i], [&](int id) { made[size_t(id)] = made[size_t(id)] || first[size_t(id)] >= b.begin; });
    b.join = g.frame.size();
    for (size_t i = b.end; i < g.frame.size() && b.join == g.frame.size(); ++i)
      each_tensor(g.frame[i], [&](int id) { if (made[size_t(id)]) b.join = std::min(b.join, i); });
  }
}

CannyOp canny_op(Graph& g, Ref x, Ref thresholds, Ref y, int n, int h, int w, int c) {
  CannyOp op;
  op.p.n = n, op.p.h = h, op.p.w = w, op.p.c = c;
  op.x = x, op.thresholds = thresholds, op.y = y;
  op.workspace = g.add_tensor("canny_workspace", Elem::U8, {int64_t(canny_workspace_bytes(op.p))});
  return op;
}

}  // namespace rtvd
