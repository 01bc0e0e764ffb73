// One way to run an op, as the op's own folder offers it (kernels/<op>/<op>_candidates.cuh): rtvd's kernels
// (each tile or config its own candidate) and the libraries' (cuDNN, cuBLASLt) alike. An op's candidates
// come best-ranked first for the params at hand; the first that can run them is the op's default, which is
// what the op's one entry point (conv2d(), attention(), linear()) runs. --kernels filters them
// (KernelFamily), and the backend's tuner times those left and keeps the fastest per layer.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/cuda_context.cuh"
#include "kernels/common/kernel_family.h"

namespace rtvd {

// Who wrote the implementation: --kernels custom leaves out cuDNN's, --kernels cudnn prefers it. cuBLASLt is
// the GEMM under every family (rtvd has no GEMM of its own to replace it): the linears', and the attention's
// where the head dim is beyond the flash kernels'.
enum class Provider { Rtvd, Cudnn, Cublaslt };

template <class Params, class... RunExtra>
struct Candidate {
  std::string name;  // unique among the op's candidates for the same params; kept in the tuning cache
  Provider provider = Provider::Rtvd;
  // Whether it can run p on this GPU and build; if not and why is given, *why names the unmet requirement.
  // Independent of ctx.workspace: the caller provides workspace_bytes().
  std::function<bool(const Params&, const CudaContext&, std::string* why)> can_implement;
  std::function<size_t(const Params&, const CudaContext&)> workspace_bytes;  // of ctx.workspace it uses
  // Launches on ctx.stream; never allocates or synchronises. Throws rtvd::Error where can_implement() is
  // false or ctx.workspace holds less than workspace_bytes().
  std::function<void(const Params&, const CudaContext&, RunExtra...)> run;
  // The slow catch-all for what the fast kernels can't run (any shape and alignment): never timed, and named
  // in the profile when it runs.
  bool fallback = false;
  // Whether the tuner should time it for p on this GPU (null: always). False where another candidate was
  // measured faster at such shapes, or where it is costly to try and rarely wins (cuDNN's attention plans are
  // compiled at run time, 50-800 ms each).
  std::function<bool(const Params&, const CudaContext&)> worth_timing;
};

// Whether a family admits a candidate: custom leaves out cuDNN's.
inline bool family_admits(KernelFamily family, Provider provider) {
  return !(family == KernelFamily::Custom && provider == Provider::Cudnn);
}

// The candidates the tuner times for p: those the family admits, no fallback, worth timing and able to run p,
// in rank order. rejected (if given) gets "name: why" for each admitted one that can't run p.
template <class C, class Params>
std::vector<const C*> tunable_candidates(const std::vector<C>& all, const Params& p, const CudaContext& ctx,
                                         KernelFamily family, std::vector<std::string>* rejected = nullptr) {
  std::vector<const C*> out;
  for (const C& c : all) {
    if (!family_admits(family, c.provider) || c.fallback || (c.worth_timing && !c.worth_timing(p, ctx))) continue;
    std::string why;
    if (c.can_implement(p, ctx, &why)) out.push_back(&c);
    else if (rejected) rejected->push_back(c.name + ": " + why);
  }
  return out;
}

// The family's default for p: with cudnn the best-ranked of cuDNN's candidates that can run it, else (and for
// auto and custom) the best-ranked of the others; auto runs that until its tuner has timed the rest. Asks
// can_implement in rank order and stops at the first yes, so costly library checks run only when reached.
// Throws rtvd::Error naming every reason when none can run p.
template <class C, class Params>
const C& default_candidate(const std::vector<C>& all, const Params& p, const CudaContext& ctx, KernelFamily family,
                           const char* op) {
  std::string reasons;
  for (const bool cudnn_pass : {true, false}) {
    if (cudnn_pass && family != KernelFamily::Cudnn) continue;
    for (const C& c : all) {
      if (!family_admits(family, c.provider) || (cudnn_pass != (c.provider == Provider::Cudnn))) continue;
      std::string why;
      if (c.can_implement(p, ctx, &why)) return c;
      reasons += cat(reasons.empty() ? "" : "; ", c.name, ": ", why);
    }
  }
  fail(op, ": no implementation can run these params (", reasons, ")");
}

// The candidate of that name, or null.
template <class C>
const C* candidate_named(const std::vector<C>& all, const std::string& name) {
  for (const C& c : all)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace rtvd
