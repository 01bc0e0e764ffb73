#include "pipeline/graph/passes.h"

#include "pipeline/graph/bind.h"

namespace rtvd {

std::vector<int> fusable_norm_pairs(std::vector<Op>& ops) {
  std::vector<int> pair(ops.size(), -1);
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto* norm = std::get_if<GroupNormOp>(&ops[i].body);
    if (!norm || norm->y || norm->stats.kind != Ref::Tensor) continue;
    std::vector<size_t> readers;
    for (size_t j = 0; j < ops.size(); ++j)
      if (j != i && touches(ops[j], norm->stats.id)) readers.push_back(j);
    const auto* conv = readers.size() == 1 ? std::get_if<ConvOp>(&ops[readers[0]].body) : nullptr;
    if (conv && readers[0] > i && conv->gn_stats.kind == Ref::Tensor && conv->gn_stats.id == norm->stats.id &&
        conv->x.kind == norm->x.kind && conv->x.id == norm->x.id && conv->x.offset == norm->x.offset)
      pair[i] = int(readers[0]), pair[readers[0]] = int(i);
  }
  return pair;
}

}  // namespace rtvd
