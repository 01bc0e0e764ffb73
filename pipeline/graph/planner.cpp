#include "pipeline/graph/planner.h"

#include <algorithm>
#include <numeric>

namespace rtvd {

size_t elem_bytes(Elem e, size_t act_bytes) {
  switch (e) {
    case Elem::Act: return act_bytes;
    case Elem::F32: return 4;
    case Elem::I32: return 4;
    case Elem::U8: return 1;
  }
  return 4;
}

namespace {

size_t align_up(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

struct Lifetime {
  int first = -1, last = -1;
};

// First and last op index touching each tensor, over setup ops then frame ops.
std::vector<Lifetime> lifetimes(Graph& g) {
  std::vector<Lifetime> life(g.tensors.size());
  int index = 0;
  auto visit = [&](std::vector<Op>& ops) {
    for (Op& op : ops) {
      std::visit([&](auto& body) {
        body.refs([&](const Ref& r, auto&) {
          if (r.kind != Ref::Tensor) return;
          Lifetime& l = life[r.id];
          if (l.first < 0) l.first = index;
          l.last = index;
        });
      }, op.body);
      ++index;
    }
  };
  visit(g.setup);
  visit(g.frame);
  for (size_t i = 0; i < life.size(); ++i)
    if (g.tensors[i].persistent) life[i] = {0, index};
  return life;
}

}  // namespace

// Greedy best-fit by decreasing size: each tensor takes the lowest offset that does not collide with a
// placed tensor whose lifetime overlaps. Near-optimal for the nested lifetimes of a U-Net.
ArenaPlan plan_arena(Graph& g, size_t act_bytes) {
  const std::vector<Lifetime> life = lifetimes(g);
  const size_t n = g.tensors.size();
  std::vector<size_t> size(n);
  for (size_t i = 0; i < n; ++i) size[i] = align_up(g.tensors[i].numel() * elem_bytes(g.tensors[i].elem, act_bytes));

  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size[a] > size[b]; });

  ArenaPlan plan;
  plan.offsets.assign(n, 0);
  struct Placed {
    size_t begin, end;
    Lifetime life;
  };
  std::vector<Placed> placed;
  for (int t : order) {
    if (life[t].first < 0) continue;  // never used by any op
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& p : placed)
      if (p.life.first <= life[t].last && life[t].first <= p.life.last) busy.emplace_back(p.begin, p.end);
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size[t] <= b) break;
      offset = std::max(offset, e);
    }
    plan.offsets[t] = offset;
    plan.bytes = std::max(plan.bytes, offset + size[t]);
    placed.push_back({offset, offset + size[t], life[t]});
  }
  return plan;
}

}  // namespace rtvd
