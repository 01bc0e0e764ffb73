// Does compute-sanitizer's racecheck report a hazard in cuBLASLt alone? The one hazard racecheck reports
// in the linear tests (then ops_cuda_test, now tests/ops/linear_test) lies inside cuBLAS's own sm_90 kernel (nvjet_sm90_hsh_..._bias_TNN). This program
// makes the same cublasLtMatmul calls as rtvd's linear() (fp16, fp32 compute, A = W^T, bias epilogue with
// an fp16 bias, as linear() stages it when this cuBLASLt refuses fp32 bias; C = residual with beta = 1) on the shapes of OpsCuda.LinearMatchesCpu, with nothing of rtvd in
// the process. On the GPU machine:
//   nvcc -arch=sm_90 -O2 tools/repro/cublaslt_racecheck.cu -lcublasLt -o repro      (here, then carried)
//   compute-sanitizer --tool racecheck ./repro
// Result (2026-11-21, H200, driver 580.159.04, cuBLAS 13.0): "Race reported between Read access at
// nvjet_sm90_hsh_64x32_64x16_2x4_h_bx_bias_TNT+0xb00 ... RACECHECK SUMMARY: 1 hazard displayed": the
// hazard comes with cuBLASLt's kernel itself (racecheck on its TMA / async-proxy code), not with rtvd.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                            \
  do {                                                                                         \
    if (auto status = (call); status != 0) {                                                   \
      std::fprintf(stderr, "%s failed (%d) at line %d\n", #call, int(status), __LINE__);      \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

struct Shape {
  int m, n, k;
  bool bias, residual;
};

int main() {
  const Shape shapes[] = {{154, 320, 1024, false, false}, {77, 1280, 1024, true, false}, {2048, 320, 320, true, true},
                          {512, 2560, 320, true, false},  {512, 320, 1280, true, true},  {256, 320, 320, true, true},
                          {64, 64, 64, true, true},       {64, 64, 64, false, false},    {100, 64, 64, true, true}};
  cublasLtHandle_t lt;
  CHECK(cublasLtCreate(&lt));
  const size_t workspace_bytes = 32 << 20;
  void* workspace;
  CHECK(cudaMalloc(&workspace, workspace_bytes));
  for (const Shape& s : shapes) {
    std::vector<__half> host(size_t(s.m) * s.k + size_t(s.n) * s.k + 2 * size_t(s.m) * s.n, __float2half(0.01f));
    __half *x, *w, *y, *residual;
    __half* bias;
    CHECK(cudaMalloc(&x, size_t(s.m) * s.k * 2));
    CHECK(cudaMalloc(&w, size_t(s.n) * s.k * 2));
    CHECK(cudaMalloc(&y, size_t(s.m) * s.n * 2));
    CHECK(cudaMalloc(&residual, size_t(s.m) * s.n * 2));
    CHECK(cudaMalloc(&bias, s.n * 2));
    CHECK(cudaMemcpy(x, host.data(), size_t(s.m) * s.k * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w, host.data(), size_t(s.n) * s.k * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(residual, host.data(), size_t(s.m) * s.n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(bias, 0, s.n * 2));

    cublasLtMatmulDesc_t desc;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
    if (s.bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const int32_t type = CUDA_R_16F;
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)));
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    cublasLtMatrixLayout_t a, b, d;
    CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, s.k, s.n, s.k));
    CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16F, s.k, s.m, s.k));
    CHECK(cublasLtMatrixLayoutCreate(&d, CUDA_R_16F, s.n, s.m, s.n));
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                               sizeof(workspace_bytes)));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, d, d, pref, 1, &result, &returned));
    const float alpha = 1.0f, beta = s.residual ? 1.0f : 0.0f;
    CHECK(cublasLtMatmul(lt, desc, &alpha, w, a, x, b, &beta, s.residual ? residual : y, d, y, d, &result.algo,
                         workspace, workspace_bytes, nullptr));
    CHECK(cudaDeviceSynchronize());
    std::printf("m %d n %d k %d bias %d residual %d: done\n", s.m, s.n, s.k, int(s.bias), int(s.residual));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatmulDescDestroy(desc);
    for (void* p : {(void*)x, (void*)w, (void*)y, (void*)residual, (void*)bias}) cudaFree(p);
  }
  cudaFree(workspace);
  cublasLtDestroy(lt);
  return 0;
}
