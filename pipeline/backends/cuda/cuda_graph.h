// Stream capture into an instantiated CUDA graph, shared by the frame's graphs and the conv tuner's.
#pragma once
#include <cuda_runtime.h>

#include <functional>

namespace rtvd {

// Captures what queue() queues on `stream` (this thread's work only) as a graph, which the caller destroys.
// If queue() throws, the capture is ended and discarded before the exception goes on.
cudaGraph_t capture_stream(cudaStream_t stream, const std::function<void()>& queue);
// capture_stream's graph, instantiated (the graph itself destroyed).
cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& queue);

}  // namespace rtvd
