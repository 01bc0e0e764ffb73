// The arena planner: on random graphs it places every tensor where the plain quadratic greedy does (the
// definition it must keep), no two tensors alive at once share a byte, and a frame of 100 steps is planned
// in well under a second (the quadratic search took 4 s for the default model).
#include "pipeline/graph/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "pipeline/frame_plan.h"
#include "pipeline/models/model.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

struct Span {
  int first = -1, last = -1;
};

// First and last op touching each tensor, setup ops first; persistent tensors span every op and one more.
std::vector<Span> spans(Graph& g) {
  std::vector<Span> life(g.tensors.size());
  int index = 0;
  for (std::vector<Op>* ops : {&g.setup, &g.frame})
    for (Op& op : *ops) {
      std::visit([&](auto& body) {
        body.refs([&](const Ref& r, auto&) {
          if (r.kind != Ref::Tensor) return;
          if (life[r.id].first < 0) life[r.id].first = index;
          life[r.id].last = index;
        });
      }, op.body);
      ++index;
    }
  for (size_t i = 0; i < life.size(); ++i)
    if (g.tensors[i].persistent) life[i] = {0, index};
  return life;
}

// The greedy by its definition: largest first, each at the lowest offset clear of every placed tensor
// whose lifetime overlaps, found by comparing with all of them.
ArenaPlan reference_plan(Graph& g, size_t act_bytes) {
  const std::vector<Span> life = spans(g);
  const size_t n = g.tensors.size();
  std::vector<size_t> size(n);
  for (size_t i = 0; i < n; ++i)
    size[i] = (size_t(g.tensors[i].numel()) * elem_bytes(g.tensors[i].elem, act_bytes) + kArenaAlignment - 1) /
              kArenaAlignment * kArenaAlignment;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size[a] > size[b]; });
  ArenaPlan plan;
  plan.offsets.assign(n, 0);
  std::vector<int> placed;
  for (int t : order) {
    if (life[t].first < 0) continue;
    std::vector<std::pair<size_t, size_t>> busy;
    for (int p : placed)
      if (life[p].first <= life[t].last && life[t].first <= life[p].last)
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + size[p]);
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size[t] <= b) break;
      offset = std::max(offset, e);
    }
    plan.offsets[t] = offset;
    plan.bytes = std::max(plan.bytes, offset + size[t]);
    placed.push_back(t);
  }
  return plan;
}

// No two tensors alive at the same op share a byte.
void expect_no_collision(Graph& g, const ArenaPlan& plan, size_t act_bytes) {
  const std::vector<Span> life = spans(g);
  for (size_t a = 0; a < g.tensors.size(); ++a)
    for (size_t b = a + 1; b < g.tensors.size(); ++b) {
      if (life[a].first < 0 || life[b].first < 0 || life[a].first > life[b].last || life[b].first > life[a].last)
        continue;
      const size_t end_a = plan.offsets[a] + size_t(g.tensors[a].numel()) * elem_bytes(g.tensors[a].elem, act_bytes);
      const size_t end_b = plan.offsets[b] + size_t(g.tensors[b].numel()) * elem_bytes(g.tensors[b].elem, act_bytes);
      EXPECT_TRUE(end_a <= plan.offsets[b] || end_b <= plan.offsets[a]) << g.tensors[a].name << " " << g.tensors[b].name;
    }
}

// Tensors of a few sizes (so that sizes tie), some persistent, some never used; ops that each touch two
// tensors, mostly near each other in op order (short lifetimes, as in a U-Net) and now and then far apart.
Graph random_graph(test::Rng& rng) {
  Graph g;
  const int tensors = rng.integer(1, 400), ops = rng.integer(1, 600);
  for (int i = 0; i < tensors; ++i) {
    const int64_t elements = rng.integer(0, 3) ? 64 * rng.integer(1, 4) : rng.integer(0, 999);
    g.add_tensor(cat("t", i), rng.integer(0, 3) ? Elem::Act : Elem::U8, {elements}, rng.integer(0, 9) == 0);
  }
  for (int k = 0; k < ops; ++k) {
    const int near = int(int64_t(k) * tensors / ops);
    const auto pick = [&] {
      return rng.integer(0, 7) ? std::clamp(near + rng.integer(-8, 8), 0, tensors - 1) : rng.integer(0, tensors - 1);
    };
    SiluOp op;
    op.x = Ref{Ref::Tensor, pick(), 0};
    op.y = Ref{Ref::Tensor, pick(), 0};
    (rng.integer(0, 4) ? g.frame : g.setup).push_back(Op{cat("op", k), op, 0, 0});
  }
  return g;
}

TEST(Planner, PlacesEveryTensorWhereTheQuadraticGreedyDoes) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(cat("trial ", trial));
    Graph g = random_graph(rng);
    const size_t act_bytes = rng.integer(0, 1) ? 2 : 4;
    const ArenaPlan plan = plan_arena(g, act_bytes), expected = reference_plan(g, act_bytes);
    ASSERT_EQ(plan.offsets, expected.offsets);
    ASSERT_EQ(plan.bytes, expected.bytes);
    if (trial < 20) expect_no_collision(g, plan, act_bytes);
  }
}

TEST(Planner, ManyStepsArePlannedQuickly) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  Model model = load_embedded_model();
  FrameSettings s;
  s.steps = 100;
  s.seed = rng.gen();
  FramePlan frame = build_frame_plan(model, frame_sampler(model, s, false), s, false, 64, 64, 4);
  const auto start = std::chrono::steady_clock::now();
  const ArenaPlan plan = plan_arena(frame.graph, 4);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0)
      << frame.graph.tensors.size() << " tensors";
  EXPECT_GT(plan.bytes, 0u);
}

}  // namespace
}  // namespace rtvd
