// cuBLASLt's algorithm-search preferences as rtvd's GEMMs set them (the linears', the GEMM attention's).
#pragma once
#include <cublasLt.h>

#include <cstdint>

#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// pref: at most workspace_bytes of scratch, every operand 16-byte aligned (the heuristic then offers kernels
// that assume it; callers check their pointers before they run one).
inline void init_cublaslt_preference(cublasLtMatmulPreferenceOpaque_t& pref, uint64_t workspace_bytes) {
  RTVD_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(&pref));
  const uint32_t alignment = 16;
  RTVD_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_bytes, sizeof(workspace_bytes)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    RTVD_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, attr, &alignment, sizeof(alignment)));
}

}  // namespace rtvd
