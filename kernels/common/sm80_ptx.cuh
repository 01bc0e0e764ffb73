// The sm_80+ PTX wrappers of the mma.sync kernels (attention.cu, conv2d.cu): cp.async into shared memory,
// ldmatrix and the m16n8k16 fp16 mma. Written once here so that both kernels issue the same instructions
// and a fix reaches both. Where the two kernels were tuned with different constraints on the compiler (a
// "memory" clobber, a volatile mma), both forms are kept as overloads and each caller keeps its own.
// sm90_ptx.cuh holds the Hopper-only ones (TMA, mbarriers, wgmma).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace rtvd::sm80 {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async ----

// 16 bytes global -> shared; with valid false nothing is read and the 16 bytes are zeroed.
// This form: .cg (bypasses L1), no memory clobber, so the compiler may move plain memory accesses across
// it (attention.cu: K/V are reused from L2 by the other query tiles of the head, and its shared-memory
// reads are ordered by cp_async_wait() and barriers).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
// This form (conv2d.cu): kViaL1 picks .ca (through L1: a 3x3 filter reads each pixel again a few k-tiles
// later for the next tap) or .cg (weights, reused by other blocks from L2). The memory clobber keeps the
// copies in program order with the plain shared-memory reads and writes around them (conv2d's GroupNorm
// prologue rewrites landed stages in place).
template <bool kViaL1>
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  if constexpr (kViaL1)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Until at most kPending committed groups are in flight. The memory clobber keeps plain shared-memory reads
// of the landed data (conv2d's prologue) after the wait.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ---- ldmatrix ----

// Volatile: they read shared memory written by cp.async, so they must stay after the barrier.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

// ---- mma ----

// c += a (16x16, row) * b (16x8, col); fp16 in, fp32 accumulate. Two overloads, the same instruction, as
// each kernel was tuned: with b as two registers (attention.cu) the asm is not volatile, so the compiler
// may move it like any register arithmetic; with b as an array (conv2d.cu) it is volatile, so it stays in
// program order with the (volatile) ldmatrix loads.
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace rtvd::sm80
