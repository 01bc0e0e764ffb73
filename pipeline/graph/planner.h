// Arena planning: every tensor of a graph gets an offset in one buffer. Transient tensors whose lifetimes
// (first to last op that touches them, setup ops first, then frame ops) don't overlap, and that no branch
// (Graph::branches) can have in use at once (one touched by the branch, one beside it), share memory;
// persistent tensors get memory of their own. Computed once per plan; the frame loop allocates nothing.
#pragma once
#include <cstddef>
#include <vector>

#include "pipeline/graph/graph.h"

namespace rtvd {

struct ArenaPlan {
  std::vector<size_t> offsets;  // per tensor, bytes from the arena base
  size_t bytes = 0;             // arena size needed
};

size_t elem_bytes(Elem e, size_t act_bytes);
constexpr size_t kArenaAlignment = 256;

ArenaPlan plan_arena(Graph& graph, size_t act_bytes);

}  // namespace rtvd
