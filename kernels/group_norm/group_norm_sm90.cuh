// group_norm on thread-block clusters (group_norm_sm90.cu): the statistics of one (image, group) inside one
// cluster of up to 8 blocks, from the slab of x each block holds in shared memory; no workspace, no grid-wide
// wait (so it also runs beside other streams' kernels). group_norm() takes it where it can run.
#pragma once
#include <string>

#include "kernels/common/cuda_context.cuh"
#include "kernels/group_norm/group_norm.h"

namespace rtvd {

// Whether group_norm_cluster can run p here: sm_90a kernels on an sm_90 GPU, hw <= 2^27, and one group's
// pixels split over at most 8 blocks fit 160 KiB of shared memory per block. Else false, and *why says what
// is unmet.
bool group_norm_cluster_can_run(const GroupNormParams& p, const CudaContext& ctx, std::string* why = nullptr);
// Runs p on clusters where group_norm_cluster_can_run, and says so; else false (*why set) and nothing runs.
// p already checked by group_norm().
bool group_norm_cluster(const GroupNormParams& p, const CudaContext& ctx, std::string* why = nullptr);

}  // namespace rtvd
