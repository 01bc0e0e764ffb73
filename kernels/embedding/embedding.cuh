// Conditioning ops on the GPU, run once per denoising step: sinusoidal timestep embedding, embedding
// lookup, FiLM combine. Tiny; what matters is that they are single launches with no host work.
#pragma once
#include "kernels/common/cuda_context.cuh"
#include "kernels/embedding/embedding.h"

namespace rtvd {

void timestep_embedding(const TimestepEmbeddingParams& p, const CudaContext& ctx);
// An id outside [0, rows) cannot be reported from the device: its output row is written as NaN.
void embedding(const EmbeddingParams& p, const CudaContext& ctx);
void film(const FilmParams& p, const CudaContext& ctx);

}  // namespace rtvd
