// Binding: resolve every Ref of a graph's ops to a pointer into backend memory, in place.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/graph/planner.h"

namespace rtvd {

struct BackendMemory {
  uint8_t* arena = nullptr;
  const ArenaPlan* plan = nullptr;
  std::vector<uint8_t*> weights;     // base pointer of each weight
  std::vector<Elem> weight_elems;
  size_t act_bytes = 4;
};

void* resolve(const Graph& g, const BackendMemory& m, const Ref& r);
// Whether the op reads or writes graph tensor `id`.
bool touches(Op& op, int id);

void bind_ops(Graph& g, std::vector<Op>& ops, const BackendMemory& m);

}  // namespace rtvd
