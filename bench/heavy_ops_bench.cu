// The compute-bound ops by candidate: each production case's "default" row (the op's entry point, which an
// untuned layer runs too) and a row per candidate that can run it, timed interleaved so that the rows
// compare, in TFLOP/s against the GEMM ceiling.
#include <algorithm>
#include <functional>

#include "bench/bench_table.cuh"
#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_candidates.cuh"
#include "kernels/attention/attention_cases.h"
#include "kernels/conv2d/conv2d.cuh"
#include "kernels/conv2d/conv2d_candidates.cuh"
#include "kernels/conv2d/conv2d_cases.h"
#include "kernels/linear/linear.cuh"
#include "kernels/linear/linear_candidates.cuh"
#include "kernels/linear/linear_cases.h"

namespace rtvd::bench {
namespace {

// The entry point (`default: ` and the candidate it runs), then every candidate but the slow fallbacks, those
// the tuner skips included (their time is still worth knowing); a cuDNN candidate that can't is said.
// all: the op's candidates for params(0); params(i) reads the i-th copy of the inputs; entry(p, ctx) is the
// op's entry point, run(c, p, ctx) a candidate. cuBLASLt's algorithms are named by rank ("cuBLASLt #3"):
// their names are 128 hex digits.
template <class C, class Params, class Entry, class Run>
void time_candidates(Table& t, const char* op, const std::string& name, double flops, const std::vector<C>& all,
                     const Params& params, const Entry& entry, const Run& run) {
  const C& d = default_candidate(all, params(0), t.host().ctx(), KernelFamily::Custom, op);
  std::vector<const C*> timed;
  for (const C& c : all) {
    if (c.fallback) continue;
    std::string why;
    if (c.can_implement(params(0), t.host().ctx(), &why)) timed.push_back(&c);
    else if (c.provider == Provider::Cudnn) t.refused(op, name, c.name, why);
  }
  size_t workspace = d.workspace_bytes(params(0), t.host().ctx());
  for (const C* c : timed) workspace = std::max(workspace, c->workspace_bytes(params(0), t.host().ctx()));
  const CudaContext& ctx = t.host().with_workspace(workspace);
  std::vector<std::function<void(int)>> fs = {[&](int i) { entry(params(i), ctx); }};
  std::vector<std::string> impls = {cat("default: ", d.name)};
  for (const C* c : timed) {
    fs.push_back([&, c](int i) { run(*c, params(i), ctx); });
    const auto rank = c - all.data();
    impls.push_back(c->name.size() > 40 ? cat("cuBLASLt #", rank + 1) : c->name);
  }
  const std::vector<double> ms = t.medians_ms(ctx, fs);
  for (size_t k = 0; k < fs.size(); ++k) t.row(op, name, impls[k], ms[k], flops, 0);
}

void bench_conv2d(Table& t) {
  for (const Conv2dCase& c : conv2d_cases()) {
    if (!c.production) continue;
    Buffers b;
    const Conv2dSizes s = conv2d_sizes(c);
    const int copies = copies_for(s.x * 2);
    std::vector<void*> xs;
    for (int i = 0; i < copies; ++i) xs.push_back(b.half_random(s.x));
    Conv2dOperands o;
    o.weight = b.half_random(s.weight, 0.05f);
    o.y = b.raw(s.y * 2);
    o.residual = b.half_random(s.y);
    o.scale = b.float_random(s.scale);
    o.bias = b.float_random(s.bias);
    o.gn_gamma = b.float_random(s.gn_gamma);
    o.gn_beta = b.float_random(s.gn_beta);
    o.gn_stats = b.float_random(s.gn_stats, 0.5f);  // (mean, rstd) in [-0.5, 0.5]: values of a real size
    const auto params = [&](int i) {
      Conv2dOperands oi = o;
      oi.x = xs[i % copies];
      return conv2d_params(c, oi);
    };
    time_candidates(
        t, "conv2d", c.name, c.flops(), conv2d_candidates(params(0), t.host().ctx()), params, [](const Conv2dParams& p, const CudaContext& x) { conv2d(p, x); },
        [](const Conv2dCandidate& cand, const Conv2dParams& p, const CudaContext& x) { cand.run(p, x, nullptr); });
  }
}

void bench_attention(Table& t) {
  for (const AttentionCase& c : attention_cases()) {
    if (!c.production) continue;
    Buffers b;
    const AttentionSizes s = attention_sizes(c);
    const int copies = copies_for(s.q_source * 2);
    std::vector<void*> qs;
    for (int i = 0; i < copies; ++i) qs.push_back(b.half_random(s.q_source));
    void* kv = s.kv_source ? b.half_random(s.kv_source) : nullptr;
    void* o = b.raw(s.o * 2);
    const auto params = [&](int i) { return attention_params(c, qs[i % copies], kv, o, 2); };
    time_candidates(
        t, "attention", c.name, c.flops(), attention_candidates(params(0), t.host().ctx()), params,
        [](const AttentionParams& p, const CudaContext& x) { attention(p, x); },
        [](const AttentionCandidate& cand, const AttentionParams& p, const CudaContext& x) { cand.run(p, x); });
  }
}

void bench_linear(Table& t) {
  for (const LinearCase& c : linear_cases()) {
    if (!c.production) continue;
    Buffers b;
    const size_t x_elems = size_t(c.m) * c.k;
    const int copies = copies_for(x_elems * 2);
    std::vector<void*> xs;
    for (int i = 0; i < copies; ++i) xs.push_back(b.half_random(x_elems));
    const void* w = b.half_random(size_t(c.n) * c.k, 0.05f);
    const float* bias = b.float_random(c.n);
    void* y = b.half_random(size_t(c.m) * c.n);
    const void* residual = c.residual == LinearResidual::Separate ? b.half_random(size_t(c.m) * c.n) : nullptr;
    const auto params = [&](int i) { return linear_params(c, xs[i % copies], w, bias, residual, y); };
    time_candidates(
        t, "linear", c.name, c.flops(), linear_candidates(params(0), t.host().ctx()), params, [](const LinearParams& p, const CudaContext& x) { linear(p, x); },
        [](const LinearCandidate& cand, const LinearParams& p, const CudaContext& x) { cand.run(p, x); });
  }
}

}  // namespace

void bench_heavy_ops(Table& t) {
  if (t.wants("conv2d")) bench_conv2d(t);
  if (t.wants("attention")) bench_attention(t);
  if (t.wants("linear")) bench_linear(t);
}

}  // namespace rtvd::bench
