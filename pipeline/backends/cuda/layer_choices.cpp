#include "pipeline/backends/cuda/layer_choices.h"

#include <algorithm>
#include <cstdint>

#include "base/error.h"
#include "pipeline/graph/passes.h"

namespace rtvd {
namespace {

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte (null: nothing).
bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return x && y && x < y + b_bytes && y < x + a_bytes;
}

// fp16 elements from the first to the last one an op with this token count and stride may touch.
size_t token_span(int tokens, int stride, int width) { return size_t(tokens - 1) * stride + width; }

// A layer that writes over its inputs would change its result when re-run: it is never timed. (x and
// residual are at least as large as y when they overlap it.)
bool overwrites_inputs(const Conv2dParams& p) {
  const size_t y_bytes = size_t(p.n) * p.h_out * p.w_out * p.c_out * 2;
  return overlaps(p.x, y_bytes, p.y, y_bytes) || overlaps(p.residual, y_bytes, p.y, y_bytes);
}
bool overwrites_inputs(const LinearParams& p) {
  const size_t y_bytes = size_t(p.m) * p.n * 2;
  return overlaps(p.y, y_bytes, p.x, size_t(p.m) * p.k * 2) || overlaps(p.y, y_bytes, p.residual, y_bytes);
}
bool overwrites_inputs(const AttentionParams& p) {
  const int width = p.heads * p.head_dim;
  const size_t o_bytes = token_span(p.batch * p.q_len, p.o_stride, width) * 2;
  return overlaps(p.o, o_bytes, p.q, token_span(p.batch * p.q_len, p.q_stride, width) * 2) ||
         overlaps(p.o, o_bytes, p.k, token_span(p.batch * p.kv_len, p.k_stride, width) * 2) ||
         overlaps(p.o, o_bytes, p.v, token_span(p.batch * p.kv_len, p.v_stride, width) * 2);
}

// The output every candidate of a layer writes, compared between them by the tuner.
LayerOutput output_of(const Conv2dParams& p) { return {p.y, size_t(p.n) * p.h_out * p.w_out * p.c_out}; }
LayerOutput output_of(const LinearParams& p) { return {p.y, size_t(p.m) * p.n}; }
LayerOutput output_of(const AttentionParams& p) {
  return {p.o, token_span(p.batch * p.q_len, p.o_stride, p.heads * p.head_dim)};
}

std::string key_of(const Conv2dParams& p) { return conv2d_shape_key(p); }
std::string key_of(const LinearParams& p) { return linear_shape_key(p); }
std::string key_of(const AttentionParams& p) { return attention_shape_key(p); }

// A conv's tuning runs read the statistics its GroupNorm op wrote: no norm to fuse.
void invoke(const Conv2dCandidate& c, const Conv2dParams& p, const CudaContext& ctx) { c.run(p, ctx, nullptr); }
template <class C, class P>
void invoke(const C& c, const P& p, const CudaContext& ctx) {
  c.run(p, ctx);
}

// Why the family's first choice is not the candidate its default is (a slower kernel runs), or "": the
// first in default_candidate()'s order (cuDNN's first with cudnn).
template <class C, class P>
std::string fallback_note(const std::vector<C>& all, const C& chosen, const P& p, const CudaContext& ctx, KernelFamily family) {
  const auto first = std::find_if(all.begin(), all.end(), [&](const C& c) {
    return family_admits(family, c.provider) && (c.provider == Provider::Cudnn) == (family == KernelFamily::Cudnn);
  });
  if (first == all.end() || &*first == &chosen) return "";
  std::string why;
  first->can_implement(p, ctx, &why);
  return cat(" (", first->name, " can't: ", why, ")");
}

}  // namespace

template <class C, class P>
void LayerChoices::decide(Slot<C>& s, const P& p, const std::string& key, const char* op) {
  const CudaContext& ctx = host_.ctx();
  if (tuner_) {
    if (const TunedChoice* cached = tuner_->cached(key))
      if ((s.chosen = candidate_named(s.all, cached->impl))) {
        s.deferred = s.chosen->provider == Provider::Cudnn;
        return;
      }
    // Tuned at its frame when another candidate may beat the default (cuDNN's assumed able: asking it
    // costs a plan, made when the layer is tuned).
    const C& reference = default_candidate(s.all, p, ctx, family_, op);
    for (const C& c : s.all)
      if (&c != &reference && family_admits(family_, c.provider) && !c.fallback &&
          (!c.worth_timing || c.worth_timing(p, ctx)) && (c.provider == Provider::Cudnn || c.can_implement(p, ctx, nullptr)))
        return;
  }
  s.chosen = &default_candidate(s.all, p, ctx, family_, op);
  s.note = fallback_note(s.all, *s.chosen, p, ctx, family_);
}

template <class C, class P>
void LayerChoices::tune(Slot<C>& s, const P& p, const std::string& key, const char* op, LayerOutput out) {
  const CudaContext& ctx = host_.ctx();
  if (const TunedChoice* cached = tuner_->cached(key))  // an earlier layer of the same shape
    if ((s.chosen = candidate_named(s.all, cached->impl))) return;
  const C& reference = default_candidate(s.all, p, ctx, family_, op);
  s.chosen = &reference;
  if (overwrites_inputs(p)) return;
  std::vector<const C*> timed = tunable_candidates(s.all, p, ctx, family_);
  timed.erase(std::remove(timed.begin(), timed.end(), &reference), timed.end());
  if (timed.empty()) return;  // nothing to choose from
  timed.insert(timed.begin(), &reference);
  std::vector<LayerCandidate> candidates;
  for (const C* c : timed)
    candidates.push_back({c->name, c->workspace_bytes(p, ctx), [c, p](const CudaContext& x) { invoke(*c, p, x); }});
  const std::string impl =
      tuner_->tune(key, out, candidates, [this](size_t bytes) -> const CudaContext& { return host_.with_workspace(bytes); }).impl;
  s.chosen = candidate_named(s.all, impl);
  if (!s.chosen) fail(op, ": the tuner chose '", impl, "', which is no candidate");
}

size_t LayerChoices::prepare(std::vector<Op>& frame) {
  frame_ = &frame;
  norm_pairs_ = fusable_norm_pairs(frame);
  convs_.assign(frame.size(), {});
  attentions_.assign(frame.size(), {});
  linears_.assign(frame.size(), {});
  const CudaContext& ctx = host_.ctx();
  for (size_t i = 0; i < frame.size(); ++i) {
    if (auto* c = std::get_if<ConvOp>(&frame[i].body)) {
      convs_[i].all = conv2d_candidates(c->p, ctx);
      decide(convs_[i], c->p, key_of(c->p), "conv2d");
    } else if (auto* a = std::get_if<AttentionOp>(&frame[i].body)) {
      attentions_[i].all = attention_candidates(a->p, ctx);
      decide(attentions_[i], a->p, key_of(a->p), "attention");
    } else if (auto* l = std::get_if<LinearOp>(&frame[i].body)) {
      linears_[i].all = linear_candidates(l->p, ctx);
      decide(linears_[i], l->p, key_of(l->p), "linear");
    }
  }
  return workspace_bytes();
}

bool LayerChoices::undecided() const {
  const auto open = [](const auto& slots) {
    return std::any_of(slots.begin(), slots.end(), [](const auto& s) { return !s.all.empty() && !s.chosen; });
  };
  return open(convs_) || open(attentions_) || open(linears_);
}

size_t LayerChoices::workspace_bytes() const {
  size_t need = 0;
  const CudaContext& ctx = host_.ctx();
  for (size_t i = 0; frame_ && i < frame_->size(); ++i) {
    const OpBody& body = (*frame_)[i].body;
    if (auto* c = std::get_if<ConvOp>(&body); c && convs_[i].chosen && !convs_[i].deferred)
      need = std::max(need, convs_[i].chosen->workspace_bytes(c->p, ctx));
    if (auto* a = std::get_if<AttentionOp>(&body); a && attentions_[i].chosen && !attentions_[i].deferred)
      need = std::max(need, attentions_[i].chosen->workspace_bytes(a->p, ctx));
  }
  return need;
}

// With auto, every layer runs its default at the first frame and is timed at the second, after the first
// output: tuning the SD U-Net's and TAESD's convs, cuDNN's attention plans and cuBLASLt's algorithm timing
// cost ~1.5 s, three times the first frame itself.
void LayerChoices::run(size_t i, Op& op, int frame, bool capturing, const CudaContext* on) {
  if (on && !capturing) fail("internal: layer choices run in another context only under capture");
  const auto run_slot = [&](auto& s, const auto& p, const char* name, auto&&... extra) {
    if (!s.chosen || s.deferred) {
      if (frame < kTunedAtFrame) {  // eager: the default's workspace (the attention's GEMM path takes ~100 MB) grows now
        const auto& def = default_candidate(s.all, p, host_.ctx(), family_, name);
        if (!capturing) host_.with_workspace(def.workspace_bytes(p, host_.ctx()));
        return invoke(def, p, on ? *on : host_.ctx());
      }
      if (capturing) fail(name, " autotune: ", key_of(p), " is not tuned before capture");
      if (!s.chosen) tune(s, p, key_of(p), name, output_of(p));
      s.deferred = false;
    }
    // Eager runs come first and grow the workspace to a choice whose need shows only now (a cuDNN plan).
    if (!capturing) host_.with_workspace(s.chosen->workspace_bytes(p, host_.ctx()));
    s.chosen->run(p, on ? *on : host_.ctx(), extra...);
  };
  if (auto* c = std::get_if<ConvOp>(&op.body)) {
    const GroupNormParams* norm = fused_norm(i);  // asked before a tuning run decides the conv
    return run_slot(convs_[i], c->p, "conv2d", norm);
  }
  if (auto* a = std::get_if<AttentionOp>(&op.body)) return run_slot(attentions_[i], a->p, "attention");
  if (auto* l = std::get_if<LinearOp>(&op.body)) return run_slot(linears_[i], l->p, "linear");
  fail("layer choices: frame op ", i, " (", op.layer, ") has no candidates");
}

bool LayerChoices::norm_skipped(size_t i) const {
  if (i >= norm_pairs_.size() || norm_pairs_[i] < 0 || !std::holds_alternative<GroupNormOp>((*frame_)[i].body)) return false;
  const Slot<Conv2dCandidate>& conv = convs_[size_t(norm_pairs_[i])];
  return conv.chosen && !conv.deferred && conv.chosen->takes_prepass;
}

const GroupNormParams* LayerChoices::fused_norm(size_t conv) const {
  const int norm = norm_pairs_[conv];
  return norm >= 0 && norm_skipped(size_t(norm)) ? &std::get<GroupNormOp>((*frame_)[size_t(norm)].body).p : nullptr;
}

std::string LayerChoices::describe(size_t i) const {
  if (!frame_ || i >= frame_->size()) return "";
  if (norm_skipped(i)) return cat("in ", (*frame_)[size_t(norm_pairs_[i])].layer, "'s pre-pass");
  const auto chosen = [](const auto& s) { return s.chosen ? s.chosen->name + s.note : "autotuned at the second frame"; };
  if (!convs_[i].all.empty()) return chosen(convs_[i]);
  if (!attentions_[i].all.empty()) return chosen(attentions_[i]);
  if (const auto& s = linears_[i]; !s.all.empty()) {
    if (!s.chosen) return "cuBLASLt, algorithms timed at the second frame";
    if (s.chosen->provider == Provider::Cublaslt && s.chosen->name != "cuBLASLt") return "cuBLASLt, timed algorithm";
    return s.chosen->name + s.note;
  }
  return "";
}

}  // namespace rtvd
