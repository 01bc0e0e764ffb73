// linear on the CPU: y(m, n) = x(m, k) * w(n, k)^T by OpenBLAS, split between the OpenMP threads, with
// the shared GEMM epilogue. With no activation the residual is accumulated by the GEMM, so y may alias
// it (h += attn(h)).
#include "kernels/linear/linear.h"

#include "kernels/common/cpu_gemm.h"
#include "kernels/common/cpu_threading.h"

namespace rtvd {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelMacs = int64_t(1) << 18;

}  // namespace

void linear_cpu(const LinearParams& p) {
  auto* y = static_cast<float*>(p.y);
  cpu::GemmEpilogue epilogue;
  epilogue.bias = p.bias;
  epilogue.act = p.act;
  epilogue.residual = static_cast<const float*>(p.residual);
  epilogue.cols = p.n;
  epilogue.check_output(y);
  cpu::use_single_threaded_blas();
  const auto* x = static_cast<const float*>(p.x);
  const auto* w = static_cast<const float*>(p.w);
#pragma omp parallel if (int64_t(p.m) * p.n * p.k >= kParallelMacs)
  cpu::gemm_team(epilogue, x, p.k, w, p.k, y, 0, p.m);
}

}  // namespace rtvd
