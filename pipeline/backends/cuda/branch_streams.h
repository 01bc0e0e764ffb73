// The frame's branches (Graph::branches) as streams inside one CUDA graph. Under capture, a branch forks
// from the frame's stream at its first op (an event the side stream waits for), runs on a side stream, and
// joins back before its join op (an event the frame's stream waits for); the captured graph then holds two
// chains that the GPU runs side by side. At batch 1 neither a ControlNet's kernels nor the U-Net's down path
// fill the GPU. Each side stream has a context of its own: its workspace (the size of the host's, so that the
// library plans made for that size hold), its grid-sync word; cuDNN's handle is shared (each call sets its
// stream), so is cuBLASLt's (each call takes its stream and workspace). While a branch is open, ops on both
// sides run with CudaContext::shares_gpu.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/common/cuda_context.cuh"
#include "pipeline/backends/cuda/cuda_memory.h"
#include "pipeline/graph/graph.h"

namespace rtvd {

class BranchStreams {
 public:
  BranchStreams() = default;
  BranchStreams(const BranchStreams&) = delete;
  BranchStreams& operator=(const BranchStreams&) = delete;
  ~BranchStreams();

  // Streams, contexts and events for these branches beside `main` (the host's context), made or resized now
  // (allocates: before a capture, never during one). A branch goes to the first side stream whose branches
  // have all joined before it begins, so that branches beside each other (two nets) get streams of their own.
  void prepare(const std::vector<Branch>& branches, const CudaContext& main);

  // Under capture, before frame op i: joins (on the main stream) the branches whose join is i, forks the
  // branch that begins at i; returns the context op i runs in.
  const CudaContext& before_op(size_t i);
  // After frame op i: a branch whose last op it was records its end.
  void after_op(size_t i);
  // After the last captured op: joins the branches that no later op joined (a capture must end with every
  // stream joined).
  void join_rest();

 private:
  struct Side {
    cudaStream_t stream = nullptr;
    DeviceMemory workspace, grid_sync;
    CudaContext ctx;
  };
  struct Events {
    cudaEvent_t fork = nullptr, done = nullptr;
  };

  std::vector<Branch> branches_;
  std::vector<size_t> side_of_;  // per branch, its index in sides_
  std::vector<std::unique_ptr<Side>> sides_;
  std::vector<Events> events_;   // per branch
  std::vector<bool> joined_;     // per branch, in this capture
  CudaContext main_, main_shared_;
  int open_ = -1;  // the branch whose ops are being queued, or -1
};

}  // namespace rtvd
