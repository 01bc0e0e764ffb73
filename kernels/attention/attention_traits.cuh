// Tile configuration of the flash-attention kernel (attention.cu), one instance per padded head dim.
// Why these shapes: docs in attention.cu's header; the numbers below follow from the register budget.
#pragma once

namespace rtvd::attention_detail {

template <int kHeadDim_, int kWarps_, int kMTiles_, int kBlockN_, int kStages_, int kMinBlocksPerSm_>
struct AttentionTraits {
  static constexpr int kHeadDim = kHeadDim_;  // padded head dim; columns past the real one are zero-filled
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = kMTiles_;  // m16 row tiles per warp: 2 halves the shared-memory reads per FLOP
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kBlockM = kWarps * kWarpRows;  // query rows per block
  static constexpr int kBlockN = kBlockN_;            // keys per K/V tile
  static constexpr int kStages = kStages_;            // K/V tiles in flight (cp.async ring)
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;

  static constexpr int kKSteps = kHeadDim / 16;  // k16 steps of Q K^T; also pairs of n8 tiles of O
  static constexpr int kDTiles = kHeadDim / 8;   // n8 tiles of O
  static constexpr int kNTiles = kBlockN / 8;    // n8 tiles of S
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte cp.async chunks per tile row
  // Row pitch in halfs: 16 bytes of padding make a row an odd number of 16-byte chunks, so the 8 row
  // addresses of one ldmatrix phase fall in 8 different bank groups.
  static constexpr int kRowPitch = kHeadDim + 8;
  static constexpr int kQTileHalfs = kBlockM * kRowPitch;
  static constexpr int kKVTileHalfs = kBlockN * kRowPitch;
  static constexpr int kSmemBytes = 2 * (kQTileHalfs + 2 * kStages * kKVTileHalfs);

  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 160, "head dim: k16 steps, and O must fit in registers");
  static_assert(kBlockN % 16 == 0, "P V consumes keys in k16 steps");
  static_assert(kMTiles == 1 || kMTiles == 2, "row tiles per warp");
  static_assert(kStages >= 2, "the ring needs a stage to fill while one is read");
  static_assert((kRowPitch / 8) % 2 == 1, "odd chunk count per row keeps ldmatrix conflict-free");
  static_assert(kSmemBytes <= 99 * 1024, "must fit sm_86/sm_89 (99 KiB per block)");
};

// Register budget per thread (fp32 O + fp32 S + fp16 Q fragments): kMTiles * (kHeadDim / 2 + kBlockN / 2
// + kHeadDim / 4). Up to head dim 64, two row tiles per warp with at most 136 of those registers, so 12 warps
// fit an SM; beyond 64, one row tile per warp. Two block shapes per head dim: Wide (4 warps) shares each
// K/V tile among 128 query rows, halving the K/V reads from L2; Narrow (2 warps, 64 rows) doubles the block
// count where a grid of Wide blocks would leave SMs with a single block. Past 64, both are 64 rows.
template <int kPaddedHeadDim> struct AttentionConfig;
template <> struct AttentionConfig<32> {
  using Wide = AttentionTraits<32, 4, 2, 64, 2, 3>;
  using Narrow = AttentionTraits<32, 2, 2, 64, 2, 4>;
};
template <> struct AttentionConfig<48> {
  using Wide = AttentionTraits<48, 4, 2, 32, 3, 3>;
  using Narrow = AttentionTraits<48, 2, 2, 32, 3, 4>;
};
template <> struct AttentionConfig<64> {
  using Wide = AttentionTraits<64, 4, 2, 32, 3, 3>;
  using Narrow = AttentionTraits<64, 2, 2, 32, 3, 4>;
};
template <> struct AttentionConfig<80> { using Wide = AttentionTraits<80, 4, 1, 64, 2, 3>; using Narrow = Wide; };
template <> struct AttentionConfig<96> { using Wide = AttentionTraits<96, 4, 1, 64, 2, 2>; using Narrow = Wide; };
template <> struct AttentionConfig<128> { using Wide = AttentionTraits<128, 4, 1, 64, 2, 2>; using Narrow = Wide; };
template <> struct AttentionConfig<160> { using Wide = AttentionTraits<160, 4, 1, 32, 3, 2>; using Narrow = Wide; };

// The instance a runtime head dim runs on (0: none). Multiples of 8 only: 16-byte chunks of a row.
constexpr int padded_head_dim(int head_dim) {
  if (head_dim <= 0 || head_dim % 8 != 0) return 0;
  for (int d : {32, 48, 64, 80, 96, 128, 160})
    if (head_dim <= d) return d;
  return 0;
}

}  // namespace rtvd::attention_detail
