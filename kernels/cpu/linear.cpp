// linear on the CPU: one OpenBLAS sgemm, y(m, n) = x(m, k) * w(n, k)^T, then the shared GEMM epilogue.
// With no activation the residual is accumulated by the GEMM, so y may alias it (h += attn(h)).
#include "kernels/linear.h"

#include <cblas.h>

#include "kernels/cpu/gemm_epilogue.h"

namespace rtvd {

void linear_cpu(const LinearParams& p) {
  auto* y = static_cast<float*>(p.y);
  cpu::GemmEpilogue epilogue;
  epilogue.bias = p.bias;
  epilogue.act = p.act;
  epilogue.residual = static_cast<const float*>(p.residual);
  epilogue.cols = p.n;
  const float beta = cpu::prepare_gemm_output(epilogue, y, 0, p.m);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p.m, p.n, p.k, 1.0f, static_cast<const float*>(p.x),
              p.k, static_cast<const float*>(p.w), p.k, beta, y, p.n);
  cpu::finish_gemm_output(epilogue, y, 0, p.m);
}

}  // namespace rtvd
