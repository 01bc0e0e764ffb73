// Which candidate (kernels/<op>/<op>_candidates.cuh) each heavy frame op of the CUDA backend runs: conv2d,
// attention and linear through one mechanism. A layer is decided at prepare() from --kernels (custom,
// cudnn: the family's default) or the tuning cache (auto), else by timing its candidates on its real
// operands (LayerTuner) at the second frame's eager run, after the first output (which ran the defaults).
// Also decides which statistics-only GroupNorms their conv's pre-pass computes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/attention_candidates.cuh"
#include "kernels/conv2d/conv2d_candidates.cuh"
#include "kernels/linear/linear_candidates.cuh"
#include "pipeline/backends/cuda/cuda_host.h"
#include "pipeline/backends/cuda/layer_tuner.h"
#include "pipeline/graph/graph.h"

namespace rtvd {

class LayerChoices {
 public:
  static constexpr int kTunedAtFrame = 2;  // with auto: the first frame since prepare() runs the defaults

  // tuner: with --kernels auto only (null otherwise).
  LayerChoices(CudaHost& host, KernelFamily family, LayerTuner* tuner) : host_(host), family_(family), tuner_(tuner) {}

  // The frame's ops, bound: lists each heavy op's candidates and decides what can be decided without
  // running. Returns the workspace the decided layers need.
  size_t prepare(std::vector<Op>& frame);
  // Whether a layer is still to be tuned.
  bool undecided() const;
  // The workspace every decided layer's choice needs (after tuning, to give back what it grew).
  size_t workspace_bytes() const;

  // Runs frame op i (eager or under capture; frame: 1 for the first frame since prepare, 2 for the
  // second, ...), tuning it first when it is undecided and its frame has come. on: under capture, the context
  // to run it in (a branch's stream, CudaContext::shares_gpu) instead of the host's.
  void run(size_t i, Op& op, int frame, bool capturing, const CudaContext* on = nullptr);
  // Whether frame op i (a GroupNorm) is skipped: its conv's pre-pass computes the statistics.
  bool norm_skipped(size_t i) const;
  // What runs frame op i, for the profile; empty for ops without candidates.
  std::string describe(size_t i) const;

 private:
  template <class C>
  struct Slot {
    std::vector<C> all;
    const C* chosen = nullptr;  // null: undecided
    std::string note;           // why the chosen one is not the best-ranked of its family, or ""
    // A cached choice of cuDNN's: the first frame runs the default, so that cuDNN's plan (50-800 ms to make
    // for attention) is not made before the first output, as when it was tuned.
    bool deferred = false;
  };
  template <class C, class P>
  void decide(Slot<C>& s, const P& p, const std::string& key, const char* op);
  template <class C, class P>
  void tune(Slot<C>& s, const P& p, const std::string& key, const char* op, LayerOutput out);
  const GroupNormParams* fused_norm(size_t conv) const;

  CudaHost& host_;
  KernelFamily family_;
  LayerTuner* tuner_;
  std::vector<Op>* frame_ = nullptr;
  std::vector<Slot<Conv2dCandidate>> convs_;  // per frame op (used for convs)
  std::vector<Slot<AttentionCandidate>> attentions_;
  std::vector<Slot<LinearCandidate>> linears_;
  std::vector<int> norm_pairs_;  // fusable_norm_pairs() of the frame
};

}  // namespace rtvd
