#include "pipeline/graph/bind.h"

#include <type_traits>

namespace rtvd {

void* resolve(const Graph& g, const BackendMemory& m, const Ref& r) {
  switch (r.kind) {
    case Ref::None: return nullptr;
    case Ref::Tensor:
      return m.arena + m.plan->offsets.at(r.id) + r.offset * elem_bytes(g.tensors.at(r.id).elem, m.act_bytes);
    case Ref::Weight: return m.weights.at(r.id) + r.offset * elem_bytes(m.weight_elems.at(r.id), m.act_bytes);
  }
  return nullptr;
}

void bind_ops(Graph& g, std::vector<Op>& ops, const BackendMemory& m) {
  for (Op& op : ops)
    std::visit([&](auto& body) {
      body.refs([&](const Ref& r, auto& field) { field = static_cast<std::decay_t<decltype(field)>>(resolve(g, m, r)); });
    }, op.body);
}

bool touches(Op& op, int id) {
  bool found = false;
  std::visit([&](auto& body) { body.refs([&](const Ref& r, auto&) { found |= r.kind == Ref::Tensor && r.id == id; }); }, op.body);
  return found;
}

}  // namespace rtvd
