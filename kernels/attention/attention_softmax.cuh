// The online softmax both flash kernels share (attention.cu on mma.sync, attention_sm90.cu on wgmma): their
// score and output accumulators have the same per-warp layout, the m16n8 C fragment repeated along n.
// T names the tile: kMTiles row tiles of 16 per warp, kNTiles n8 tiles of keys, kDTiles n8 tiles of O.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace rtvd::attention_detail {

constexpr float kLog2e = 1.4426950408889634f;

// One MUFU instruction; 2^-inf = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// lo goes to the low half: the element with the smaller index in an mma fragment register.
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Keys at or past `valid` (kv_len - first key of the tile) get -inf scores: weight exactly 0.
template <class T>
__device__ __forceinline__ void mask_keys(float (&s)[T::kMTiles][T::kNTiles][4], int valid, int lane) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < T::kNTiles; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (n * 8 + (lane % 4) * 2 + i % 2 >= valid) s[mt][n][i] = -INFINITY;
}

// The causal mask: keys after their query get -inf scores. key_minus_row = the tile's first key minus the
// warp's first query row (both within the image); s[mt][n][i] is row mt*16 + (i/2)*8 + lane/4 of the warp and
// key n*8 + (lane%4)*2 + i%2 of the tile. Every row keeps key 0 of tile 0, so its running max is finite from
// the first tile on and the fully masked tiles after it weigh exactly 0.
template <class T>
__device__ __forceinline__ void mask_causal(float (&s)[T::kMTiles][T::kNTiles][4], int key_minus_row, int lane) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < T::kNTiles; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (key_minus_row + n * 8 + (lane % 4) * 2 + i % 2 > mt * 16 + (i / 2) * 8 + lane / 4) s[mt][n][i] = -INFINITY;
}

// Online softmax over one tile. A thread holds rows lane/4 (i = 0, 1) and lane/4 + 8 (i = 2, 3) of each
// row tile; the 4 lanes of a quad share a row, so row maxima are reduced over the quad. row_max is in the
// log2 domain (scores * scale * log2 e); row_sum stays a per-lane partial sum until the end. On return s
// holds the unnormalised probabilities, and correction the factor O must be rescaled by (rescale_rows()).
template <class T>
__device__ __forceinline__ void softmax_update(float (&s)[T::kMTiles][T::kNTiles][4],
                                               float (&row_max)[T::kMTiles][2], float (&row_sum)[T::kMTiles][2],
                                               float (&correction)[T::kMTiles][2], float scale_log2) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < T::kNTiles; ++n)
        tile_max = fmaxf(tile_max, fmaxf(s[mt][n][2 * half], s[mt][n][2 * half + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[mt][half], tile_max * scale_log2);  // scale > 0: max commutes
      // While a row has seen only -inf, subtract 0 so that exp2 yields 0 rather than NaN (-inf - -inf).
      const float shift = new_max == -INFINITY ? 0.0f : new_max;
      correction[mt][half] = exp2_approx(row_max[mt][half] - shift);
      row_max[mt][half] = new_max;
      row_sum[mt][half] *= correction[mt][half];
#pragma unroll
      for (int n = 0; n < T::kNTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[mt][n][2 * half + e];
          x = exp2_approx(fmaf(x, scale_log2, -shift));
          row_sum[mt][half] += x;
        }
      }
    }
  }
}

// O's rows times softmax_update()'s correction.
template <class T>
__device__ __forceinline__ void rescale_rows(float (&o)[T::kMTiles][T::kDTiles][4],
                                             const float (&correction)[T::kMTiles][2]) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int d = 0; d < T::kDTiles; ++d)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[mt][d][i] *= correction[mt][i / 2];
}

// softmax_update() and O rescaled at once.
template <class T>
__device__ __forceinline__ void online_softmax(float (&s)[T::kMTiles][T::kNTiles][4],
                                               float (&o)[T::kMTiles][T::kDTiles][4],
                                               float (&row_max)[T::kMTiles][2], float (&row_sum)[T::kMTiles][2],
                                               float scale_log2) {
  float correction[T::kMTiles][2];
  softmax_update<T>(s, row_max, row_sum, correction, scale_log2);
  rescale_rows<T>(o, correction);
}

}  // namespace rtvd::attention_detail
