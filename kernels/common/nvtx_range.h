// A scoped NVTX range, shown by Nsight Systems (kernels per launcher, layers per backend op). Costs one
// indirect call when no profiler is attached.
#pragma once
#include <nvtx3/nvToolsExt.h>

namespace rtvd {

struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace rtvd
