// linear's candidates and its one entry point, linear(): see linear_candidates.cuh.
#include "kernels/linear/linear_candidates.cuh"

#include "kernels/linear/linear.cuh"

namespace rtvd {

std::string linear_shape_key(const LinearParams& p) {
  return cat("linear ", p.m, "x", p.k, " -> ", p.n, p.bias ? " bias" : "", p.residual ? " res" : "",
             p.act != Activation::None ? cat(" ", activation_name(p.act)) : "");
}

std::vector<LinearCandidate> linear_candidates(const LinearParams& p, const CudaContext& ctx) {
  const auto cublaslt = [](std::string name, std::string algorithm) {
    LinearCandidate c;
    c.name = std::move(name);
    c.provider = Provider::Cublaslt;
    c.can_implement = [](const LinearParams& q, const CudaContext& x, std::string* why) {
      return linear_cublaslt_can_implement(q, x, why);
    };
    c.workspace_bytes = [](const LinearParams&, const CudaContext&) { return size_t(0); };  // uses what ctx has
    c.run = [algorithm](const LinearParams& q, const CudaContext& x) { linear_cublaslt(q, x, algorithm); };
    return c;
  };
  // cuBLASLt's first choice, then its other ranked algorithms (the first of which is that choice again).
  std::vector<LinearCandidate> out = {cublaslt("cuBLASLt", "")};
  const std::vector<std::string> algorithms = linear_algorithms(p, ctx);
  for (size_t i = 1; i < algorithms.size(); ++i) out.push_back(cublaslt(algorithms[i], algorithms[i]));
  LinearCandidate fallback;
  fallback.name = "custom fallback";
  fallback.can_implement = [](const LinearParams&, const CudaContext&, std::string*) { return true; };
  fallback.workspace_bytes = [](const LinearParams&, const CudaContext&) { return size_t(0); };
  fallback.run = linear_fallback;
  fallback.fallback = true;  // where cuBLASLt can, it is faster
  out.push_back(std::move(fallback));
  return out;
}

void linear(const LinearParams& p, const CudaContext& ctx) {
  const std::vector<LinearCandidate> all = linear_candidates(p, ctx);
  default_candidate(all, p, ctx, KernelFamily::Custom, "linear").run(p, ctx);
}

}  // namespace rtvd
