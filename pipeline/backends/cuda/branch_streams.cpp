#include "pipeline/backends/cuda/branch_streams.h"

#include "pipeline/backends/cuda/cuda_host.h"

namespace rtvd {

BranchStreams::~BranchStreams() {  // destructor: nothing to report to
  for (const Events& e : events_) {
    if (e.fork) cudaEventDestroy(e.fork);
    if (e.done) cudaEventDestroy(e.done);
  }
  for (const std::unique_ptr<Side>& s : sides_) {
    cudaStreamSynchronize(s->stream);
    cudaStreamDestroy(s->stream);
  }
}

void BranchStreams::prepare(const std::vector<Branch>& branches, const CudaContext& main) {
  branches_ = branches;
  main_ = main_shared_ = main;
  main_shared_.shares_gpu = true;
  side_of_.assign(branches.size(), 0);
  std::vector<size_t> free_from;  // per side stream, the op from which it is free: its last branch's join
  for (size_t b = 0; b < branches.size(); ++b) {
    size_t s = 0;
    while (s < free_from.size() && free_from[s] > branches[b].begin) ++s;
    if (s == free_from.size()) free_from.push_back(0);
    free_from[s] = branches[b].join;
    side_of_[b] = s;
  }
  while (sides_.size() < free_from.size()) {
    auto side = std::make_unique<Side>();
    RTVD_CUDA_CHECK(cudaStreamCreateWithFlags(&side->stream, cudaStreamNonBlocking));
    side->grid_sync = DeviceMemory(sizeof(unsigned), "grid sync word");
    RTVD_CUDA_CHECK(cudaMemset(side->grid_sync.get(), 0, sizeof(unsigned)));
    sides_.push_back(std::move(side));
  }
  for (const std::unique_ptr<Side>& side : sides_) {
    if (side->workspace.bytes() != main.workspace_bytes) {
      RTVD_CUDA_CHECK(cudaStreamSynchronize(side->stream));
      side->workspace = DeviceMemory();
      side->workspace = DeviceMemory(main.workspace_bytes, "branch workspace");
    }
    side->ctx = main_shared_;
    side->ctx.stream = side->stream;
    side->ctx.workspace = side->workspace.get();
    side->ctx.grid_sync = side->grid_sync.as<unsigned>();
  }
  while (events_.size() < branches.size()) {
    Events e;
    RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&e.fork, cudaEventDisableTiming));
    RTVD_CUDA_CHECK(cudaEventCreateWithFlags(&e.done, cudaEventDisableTiming));
    events_.push_back(e);
  }
  joined_.assign(branches.size(), false);
  open_ = -1;
}

const CudaContext& BranchStreams::before_op(size_t i) {
  bool beside = false;  // op i may run beside a branch
  for (size_t b = 0; b < branches_.size(); ++b) {
    const Branch& br = branches_[b];
    if (br.join == i && !joined_[b]) {
      RTVD_CUDA_CHECK(cudaStreamWaitEvent(main_.stream, events_[b].done, 0));
      joined_[b] = true;
    }
    if (br.begin == i) {
      RTVD_CUDA_CHECK(cudaEventRecord(events_[b].fork, main_.stream));
      RTVD_CUDA_CHECK(cudaStreamWaitEvent(sides_[side_of_[b]]->stream, events_[b].fork, 0));
      open_ = int(b);
    }
    beside = beside || (br.end <= i && i < br.join);
  }
  if (open_ >= 0) return sides_[side_of_[size_t(open_)]]->ctx;
  return beside ? main_shared_ : main_;
}

void BranchStreams::after_op(size_t i) {
  if (open_ < 0 || branches_[size_t(open_)].end != i + 1) return;
  RTVD_CUDA_CHECK(cudaEventRecord(events_[size_t(open_)].done, sides_[side_of_[size_t(open_)]]->stream));
  open_ = -1;
}

void BranchStreams::join_rest() {
  for (size_t b = 0; b < branches_.size(); ++b)
    if (!joined_[b]) {
      RTVD_CUDA_CHECK(cudaStreamWaitEvent(main_.stream, events_[b].done, 0));
      joined_[b] = true;
    }
}

}  // namespace rtvd
