// TMA descriptors (CUtensorMap) for the sm_90a kernels, made on the host at each launch.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace rtvd {

// An fp16 tensor of `rank` dims (dims[0] contiguous; strides_bytes[i] between elements of dim i + 1, multiples
// of 16) read in boxes of box[i] elements, box[0] * 2 == 128 bytes, 128-byte swizzled (wgmma's K-major
// layout). Elements outside the tensor read as zeros. Throws rtvd::Error naming `what` if the driver refuses.
CUtensorMap make_tensor_map_f16(const char* what, const void* base, int rank, const uint64_t* dims,
                                const uint64_t* strides_bytes, const uint32_t* box);

}  // namespace rtvd
