// The arena planner: on random graphs, with and without branches (Graph::branches), it places every tensor
// where the plain quadratic greedy does (the definition it must keep), no two tensors alive at once (or
// touched by a branch and beside it) share a byte, and a frame of 100 steps is planned in well under a second
// (the quadratic search took 4 s for the default model).
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

// First and last op touching each tensor, setup ops first; persistent tensors span every op and one more.
// in[b] / beside[b]: whether an op of branch b, or one beside it (frame ops [end, join)), touches the tensor.
struct Span {
  int first = -1, last = -1;
  std::vector<bool> in, beside;
};

std::vector<Span> spans(Graph& g) {
  std::vector<Span> life(g.tensors.size());
  for (Span& s : life) s.in = s.beside = std::vector<bool>(g.branches.size(), false);
  int index = 0;
  for (std::vector<Op>* ops : {&g.setup, &g.frame})
    for (size_t i = 0; i < ops->size(); ++i) {
      std::visit([&](auto& body) {
        body.refs([&](const Ref& r, auto&) {
          if (r.kind != Ref::Tensor) return;
          Span& l = life[r.id];
          if (l.first < 0) l.first = index;
          l.last = index;
          for (size_t b = 0; b < g.branches.size() && ops == &g.frame; ++b) {
            const Branch& br = g.branches[b];
            if (br.begin <= i && i < br.end) l.in[b] = true;
            if (br.end <= i && i < br.join) l.beside[b] = true;
          }
        });
      }, (*ops)[i].body);
      ++index;
    }
  for (size_t i = 0; i < life.size(); ++i)
    if (g.tensors[i].persistent) life[i] = {0, index, {}, {}};
  return life;
}

// Whether two tensors may be in use at once: their spans overlap, or a branch touches one and an op beside it
// the other.
bool together(const Span& a, const Span& b) {
  if (a.first < 0 || b.first < 0) return false;
  if (a.first <= b.last && b.first <= a.last) return true;
  for (size_t k = 0; k < a.in.size() && k < b.in.size(); ++k)
    if ((a.in[k] && b.beside[k]) || (a.beside[k] && b.in[k])) return true;
  return false;
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
      if (together(life[p], life[t])) busy.emplace_back(plan.offsets[p], plan.offsets[p] + size[p]);
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
      if (!together(life[a], life[b])) continue;
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
  // Up to 3 branches, one after another, over the frame's ops.
  size_t at = 0;
  for (int b = rng.integer(0, 3); b > 0 && at + 2 <= g.frame.size(); --b) {
    const size_t begin = at + size_t(rng.integer(0, int(std::min<size_t>(g.frame.size() - at - 2, 20))));
    const size_t end = begin + 1 + size_t(rng.integer(0, int(std::min<size_t>(g.frame.size() - begin - 1, 40))));
    g.branches.push_back({begin, end});
    at = end;
  }
  join_branches(g);
  return g;
}

TEST(Planner, PlacesEveryTensorWhereTheQuadraticGreedyDoes) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  int branched = 0;
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(cat("trial ", trial));
    Graph g = random_graph(rng);
    branched += !g.branches.empty();
    const size_t act_bytes = rng.integer(0, 1) ? 2 : 4;
    const ArenaPlan plan = plan_arena(g, act_bytes), expected = reference_plan(g, act_bytes);
    ASSERT_EQ(plan.offsets, expected.offsets);
    ASSERT_EQ(plan.bytes, expected.bytes);
    if (trial < 20) expect_no_collision(g, plan, act_bytes);
  }
  EXPECT_GT(branched, 50);
}

// A branch's tensors and those beside it never share memory, where without the branch they would: a chain of
// ops, each reading the tensor the op before wrote, first as one stream, then with its first half a branch
// whose output the last op reads.
TEST(Planner, BranchesKeepTheirTensorsApart) {
  const auto chain = [](bool branched) {
    Graph g;
    const int n = 8;
    std::vector<Ref> t;
    for (int i = 0; i <= n; ++i) t.push_back(g.add_tensor(cat("t", i), Elem::F32, {1024}));
    const Ref in = g.add_tensor("in", Elem::F32, {1024}, true);
    for (int i = 0; i < n; ++i) {  // op i: t[i + 1] from t[i]; the second half starts from `in`
      SiluOp op;
      op.x = i == n / 2 ? in : t[size_t(i)];
      op.y = t[size_t(i + 1)];
      g.frame.push_back(Op{cat("op", i), op, 0, 0});
    }
    ConcatOp join;  // reads the branch's last output and the chain's
    join.a = t[n / 2];
    join.b = t[n];
    join.y = g.add_tensor("out", Elem::F32, {2048}, true);
    g.frame.push_back(Op{"join", join, 0, 0});
    if (branched) g.branches.push_back({0, size_t(n / 2)});
    join_branches(g);
    if (branched) EXPECT_EQ(g.branches[0].join, size_t(n));
    return g;
  };
  Graph plain = chain(false), branched = chain(true);
  const ArenaPlan a = plan_arena(plain, 4), b = plan_arena(branched, 4);
  const auto collide = [](const ArenaPlan& p, int x, int y) {
    return p.offsets[size_t(x)] < p.offsets[size_t(y)] + 4096 && p.offsets[size_t(y)] < p.offsets[size_t(x)] + 4096;
  };
  // The branch's tensors (t0 to t4) and those beside it (t5 to t8): some share memory without the branch, none
  // with it.
  int shared_plain = 0;
  for (int x = 0; x <= 4; ++x)
    for (int y = 5; y <= 8; ++y) {
      shared_plain += collide(a, x, y);
      EXPECT_FALSE(collide(b, x, y)) << "t" << x << " t" << y;
    }
  EXPECT_GT(shared_plain, 0);
  expect_no_collision(branched, b, 4);
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
