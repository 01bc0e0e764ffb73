// Every launch of rtvd's own kernels, with programmatic dependent launch (PDL, sm_90+) where it can be had.
//
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may be scheduled before the
// kernel ahead of it in the stream has finished: as soon as every block of that one has executed
// griddepcontrol.launch_dependents (or exited). Its blocks then sit in griddepcontrol.wait, which returns
// once the kernels ahead have completed and all their memory operations are visible. Under stream capture
// the same launch becomes a programmatic edge of the graph. What it saves is the gap between two kernels:
// the launch, the block dispatch and the first instructions overlap the predecessor's last wave.
//
// The rules every kernel launched here keeps (CUDA programming guide, "Programmatic Dependent Launch and
// Synchronization"; PTX ISA, griddepcontrol):
// - It waits (griddepcontrol.wait) in every thread, before any early return and before its first global
//   memory access, read or write. Reads need the predecessor's results; writes must not land in a buffer
//   an earlier kernel still reads (the arena reuses memory). A kernel that skipped the wait could also
//   finish before its predecessor, and then the next kernel's wait would not cover that predecessor.
// - It triggers its dependents (griddepcontrol.launch_dependents) right after the wait. The trigger only
//   lets the next kernel be scheduled; it makes nothing visible: the next kernel's wait still waits for
//   this one to complete with all its writes, so triggering before this kernel's work is safe. Triggering
//   after the wait keeps at most two kernels in flight: the next one's blocks take what this one's last
//   wave leaves free (a trigger counts once every block has issued it, so all of this kernel's blocks are
//   resident by then: a kernel whose blocks wait for each other, as group_norm's do, cannot be starved).
// start_after_prior_kernels() does both, as each kernel's first statement, or after work that touches only
// the kernel's params, its tensor maps and shared memory (index math, barrier initialisation, tensor-map
// prefetch: conv2d's implicit GEMM, the wgmma conv and the wgmma attention), which then overlaps the kernels
// ahead.
// Library kernels (cuBLASLt, cuDNN) and memsets are ordinary stream operations: what follows them starts
// when they have completed, and they start when what precedes them has completed.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// Every kernel launched here calls it in every thread, before its first global memory access: waits for the
// kernels ahead (their writes visible), then lets the next kernel be scheduled. griddepcontrol exists from
// sm_90 on; below it nothing is launched programmatically and there is nothing to wait for.
__device__ __forceinline__ void start_after_prior_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether PDL is on: RTVD_PDL, read once: unset or 1 on, 0 off; any other value throws (one line naming it).
bool pdl_enabled();
// The same rule on a value (null: unset), for the tests.
bool pdl_setting(const char* value);

// Whether `kernel` is launched with the PDL attribute: PDL is on and the code the device runs for it was
// compiled for sm_90 or later (its PTX version), so that it contains the wait. A kernel built only for
// sm_80 runs on an H100 from JIT-compiled PTX without griddepcontrol, and must keep the full dependency.
// Answered once per kernel.
bool launches_programmatically(const void* kernel);

// Launches kernel<<<grid, block, smem, stream>>>(args...) in thread-block clusters of `cluster` blocks (sm_90+;
// grid a multiple of it in each dimension; a cluster of one is an ordinary launch); a failed launch throws,
// naming `op`.
template <class... Params, class... Args>
void launch_cluster_kernel(const char* op, void (*kernel)(Params...), dim3 grid, dim3 cluster, dim3 block, size_t smem,
                           cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attrs[2]{};
  unsigned count = 0;
  if (launches_programmatically(reinterpret_cast<const void*>(kernel))) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count++].val.clusterDim = {cluster.x, cluster.y, cluster.z};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = count;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // the launch error is reported here, not again by the next check
    fail("launch of ", op, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  }
}

// The same without clusters.
template <class... Params, class... Args>
void launch_kernel(const char* op, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args&&... args) {
  launch_cluster_kernel(op, kernel, grid, dim3(1, 1, 1), block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace rtvd
