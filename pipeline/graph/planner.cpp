#include "pipeline/graph/planner.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <utility>

#include "base/checked_math.h"

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

// First and last op index touching a tensor; first < 0: none.
struct Span {
  int first = -1, last = -1;
};

// Where a tensor is live: a span over the setup ops then the frame ops, and one over the cached frame's ops
// (indexed after them), each empty where its list does not touch the tensor. The two frame lists run in turn,
// never together, so a tensor that both touch (the cached frame repeats the frame's encode, sampler and
// decode ops) is live in two windows, and what lives between them may share its memory.
// Branches (Graph::branches) add a second way to be live together: a tensor that an op of a branch touches
// (a mark {branch, false}) and one that an op beside it touches ({branch, true}) may be in use at once whatever
// their spans. `beside` holds, per branch, the op indices of the branch and of the ops beside it.
struct Lifetime {
  Span spans[2];
  std::vector<std::pair<int, bool>> marks;  // {branch, beside}, each once
  bool used() const { return spans[0].first >= 0 || spans[1].first >= 0; }
};

struct BranchSpans {
  Span in, beside;  // op indices (setup ops first): the branch's ops, the ops that may run beside them
};

std::vector<BranchSpans> branch_spans(const Graph& g) {
  std::vector<BranchSpans> out;
  const int base = int(g.setup.size());
  for (const Branch& b : g.branches)
    out.push_back({{base + int(b.begin), base + int(b.end) - 1}, {base + int(b.end), base + int(b.join) - 1}});
  return out;
}

std::vector<Lifetime> lifetimes(Graph& g) {
  std::vector<Lifetime> life(g.tensors.size());
  const std::vector<BranchSpans> branches = branch_spans(g);
  const auto mark = [&](Lifetime& l, int index) {
    for (int b = 0; b < int(branches.size()); ++b)
      for (const bool beside : {false, true}) {
        const Span& s = beside ? branches[size_t(b)].beside : branches[size_t(b)].in;
        if (index < s.first || index > s.last) continue;
        const std::pair<int, bool> m{b, beside};
        if (std::find(l.marks.begin(), l.marks.end(), m) == l.marks.end()) l.marks.push_back(m);
      }
  };
  int index = 0;
  auto visit = [&](std::vector<Op>& ops, int window) {
    for (Op& op : ops) {
      std::visit([&](auto& body) {
        body.refs([&](const Ref& r, auto&) {
          if (r.kind != Ref::Tensor) return;
          Span& l = life[r.id].spans[window];
          if (l.first < 0) l.first = index;
          l.last = index;
          if (window == 0) mark(life[r.id], index);
        });
      }, op.body);
      ++index;
    }
  };
  visit(g.setup, 0);
  visit(g.frame, 0);
  visit(g.cached_frame, 1);
  for (size_t i = 0; i < life.size(); ++i)
    if (g.tensors[i].persistent) life[i] = {{{0, index}, {}}, {}};
  return life;
}

bool overlap(const Span& a, const Span& b) { return a.first >= 0 && b.first >= 0 && a.first <= b.last && b.first <= a.last; }
bool overlap(const Lifetime& a, const Lifetime& b) {
  for (const Span& x : a.spans)
    for (const Span& y : b.spans)
      if (overlap(x, y)) return true;
  for (const auto& [branch, beside] : a.marks)
    if (std::find(b.marks.begin(), b.marks.end(), std::pair{branch, !beside}) != b.marks.end()) return true;
  return false;
}

// The placed tensors, indexed for first-fit queries. Planning used to compare each tensor with every placed
// one and sort the overlapping ones: quadratic, 4 s for the default model at 100 steps (17,000 tensors). A
// frame's transients live a few ops each, so they are filed in buckets of op indices and a query reads only
// the buckets of its own lifetime; persistent tensors overlap every query and are kept apart, as sorted
// ranges. The answers are the ones the quadratic search gives.
class Placement {
 public:
  Placement(int ops, size_t tensors, std::vector<BranchSpans> branches)
      : buckets_(size_t(ops) / kBucketOps + 1), ranges_(tensors), seen_(tensors, -1), branches_(std::move(branches)) {}

  // The lowest offset where `size` bytes collide with no placed tensor whose lifetime overlaps `life`.
  size_t first_fit(const Lifetime& life, size_t size, bool persistent) {
    if (persistent) return first_fit_sorted(size, union_.begin(), union_.end(), {}, 0);  // it overlaps them all
    ++query_;
    std::vector<std::pair<size_t, size_t>> local;
    const auto scan = [&](const Span& span) {
      for (int b = span.first / kBucketOps; span.first >= 0 && b <= span.last / kBucketOps; ++b)
        for (int id : buckets_[size_t(b)]) {
          if (seen_[size_t(id)] == query_) continue;
          seen_[size_t(id)] = query_;
          const Range& r = ranges_[size_t(id)];
          if (overlap(r.life, life)) local.emplace_back(r.begin, r.end);
        }
    };
    for (const Span& span : life.spans) scan(span);
    // A tensor marked on the other side of a branch touches an op there: it is filed in that span's buckets.
    for (const auto& [branch, beside] : life.marks) {
      const BranchSpans& b = branches_[size_t(branch)];
      scan(beside ? b.in : b.beside);
    }
    std::sort(local.begin(), local.end());
    return first_fit_sorted(size, persistent_.begin(), persistent_.end(), local, 0);
  }

  void add(int id, size_t begin, size_t end, const Lifetime& life, bool persistent) {
    ranges_[size_t(id)] = {begin, end, life};
    if (persistent) {
      persistent_.emplace(begin, end);
    } else {
      for (const Span& span : life.spans)
        for (int b = span.first / kBucketOps; span.first >= 0 && b <= span.last / kBucketOps; ++b)
          buckets_[size_t(b)].push_back(id);
    }
    // The union of every placed range, merged where ranges meet: what a persistent tensor must avoid.
    auto it = union_.upper_bound(begin);
    if (it != union_.begin() && std::prev(it)->second >= begin) it = std::prev(it);
    while (it != union_.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = union_.erase(it);
    }
    union_.emplace(begin, end);
  }

 private:
  static constexpr int kBucketOps = 64;
  struct Range {
    size_t begin = 0, end = 0;
    Lifetime life;
  };
  using Ranges = std::multimap<size_t, size_t>;  // begin -> end

  // The greedy's scan over busy ranges in order of their begin: the first gap of `size` bytes. The ranges
  // come from a sorted map and a sorted list, merged as they are read.
  static size_t first_fit_sorted(size_t size, Ranges::const_iterator a, Ranges::const_iterator a_end,
                                 const std::vector<std::pair<size_t, size_t>>& b, size_t b_at) {
    size_t offset = 0;
    while (a != a_end || b_at < b.size()) {
      const bool from_a = b_at == b.size() || (a != a_end && a->first < b[b_at].first);
      const size_t begin = from_a ? a->first : b[b_at].first, end = from_a ? a->second : b[b_at].second;
      if (from_a) ++a;
      else ++b_at;
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    return offset;
  }

  std::vector<std::vector<int>> buckets_;  // per kBucketOps op indices, the placed transients alive there
  std::vector<Range> ranges_;              // per tensor id, once placed
  Ranges persistent_, union_;
  std::vector<int> seen_;  // the query that last read each tensor: one read per query however many buckets
  int query_ = 0;
  std::vector<BranchSpans> branches_;
};

}  // namespace

// Greedy best-fit by decreasing size: each tensor takes the lowest offset that does not collide with a
// placed tensor whose lifetime overlaps. Near-optimal for the nested lifetimes of a U-Net.
ArenaPlan plan_arena(Graph& g, size_t act_bytes) {
  const std::vector<Lifetime> life = lifetimes(g);
  const size_t n = g.tensors.size();
  std::vector<size_t> size(n);
  for (size_t i = 0; i < n; ++i) {
    const TensorInfo& t = g.tensors[i];
    size[i] = align_up(size_t(checked_numel(t.shape, t.name, int64_t(elem_bytes(t.elem, act_bytes)))));
  }

  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size[a] > size[b]; });

  ArenaPlan plan;
  plan.offsets.assign(n, 0);
  Placement placed(int(g.setup.size() + g.frame.size() + g.cached_frame.size()) + 1, n, branch_spans(g));
  for (int t : order) {
    if (!life[t].used()) continue;  // never used by any op
    const bool persistent = g.tensors[t].persistent;
    const size_t offset = placed.first_fit(life[t], size[t], persistent);
    plan.offsets[t] = offset;
    const size_t end = size_t(checked_add(int64_t(offset), int64_t(size[t]), "activation arena"));
    plan.bytes = std::max(plan.bytes, end);
    placed.add(t, offset, end, life[t], persistent);
  }
  return plan;
}

}  // namespace rtvd
