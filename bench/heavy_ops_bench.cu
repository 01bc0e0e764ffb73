// The compute-bound ops by candidate: each production case's "default" row (what the op's entry point and an
// untuned layer run) and a row per candidate that can run it, in TFLOP/s against the GEMM ceiling.
#include <algorithm>

#include "bench/bench_table.cuh"
#include "kernels/attention/attention_candidates.cuh"
#include "kernels/attention/attention_cases.h"
#include "kernels/conv2d/conv2d_candidates.cuh"
#include "kernels/conv2d/conv2d_cases.h"
#include "kernels/linear/linear_candidates.cuh"
#include "kernels/linear/linear_cases.h"

namespace rtvd::bench {
namespace {

// The default, then every candidate but the slow fallbacks, those the tuner skips included (their time is
// still worth knowing); a cuDNN candidate that can't is said.
template <class C, class P, class Time>
void time_candidates(Table& t, const char* op, const std::string& name, const std::vector<C>& all, const P& p,
                     const Time& time) {
  const CudaContext& ctx = t.host().ctx();
  const C& d = default_candidate(all, p, ctx, KernelFamily::Custom, op);
  time(cat("default: ", d.name), d);
  for (const C& c : all) {
    if (c.fallback) continue;
    std::string why;
    if (c.can_implement(p, ctx, &why)) time(c.name, c);
    else if (c.provider == Provider::Cudnn) t.refused(op, name, c.name, why);
  }
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
    o.x = xs[0];
    Conv2dParams p = conv2d_params(c, o);
    const std::vector<Conv2dCandidate> all = conv2d_candidates(p, t.host().ctx());
    time_candidates(t, "conv2d", c.name, all, p, [&](const std::string& impl, const Conv2dCandidate& cand) {
      const CudaContext& ctx = t.host().with_workspace(cand.workspace_bytes(p, t.host().ctx()));
      t.row("conv2d", c.name, impl, t.median_ms(ctx, [&](int i) {
        p.x = xs[i % copies];
        cand.run(p, ctx, nullptr);
      }), c.flops(), 0);
    });
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
    const std::vector<AttentionCandidate> all = attention_candidates(params(0), t.host().ctx());
    time_candidates(t, "attention", c.name, all, params(0), [&](const std::string& impl, const AttentionCandidate& cand) {
      const CudaContext& ctx = t.host().with_workspace(cand.workspace_bytes(params(0), t.host().ctx()));
      t.row("attention", c.name, impl, t.median_ms(ctx, [&](int i) { cand.run(params(i), ctx); }), c.flops(), 0);
    });
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
    const std::vector<LinearCandidate> all = linear_candidates(params(0), t.host().ctx());
    time_candidates(t, "linear", c.name, all, params(0), [&](const std::string& impl, const LinearCandidate& cand) {
      const CudaContext& ctx = t.host().ctx();
      // cuBLASLt's algorithms by rank ("cuBLASLt #3"): their names are 128 hex digits.
      const auto rank = std::find_if(all.begin(), all.end(), [&](const LinearCandidate& x) { return &x == &cand; }) - all.begin();
      const std::string shown = impl.size() > 40 ? cat("cuBLASLt #", rank + 1) : impl;
      t.row("linear", c.name, shown, t.median_ms(ctx, [&](int i) { cand.run(params(i), ctx); }), c.flops(), 0);
    });
  }
}

}  // namespace

void bench_heavy_ops(Table& t) {
  bench_conv2d(t);
  bench_attention(t);
  bench_linear(t);
}

}  // namespace rtvd::bench
