// Threading of the CPU backend: OpenMP's threads are the only ones. OpenBLAS (a pthreads build, with a
// pool of its own) is made single-threaded and called from inside OpenMP regions, each thread on its
// pieces of a GEMM. Two pools on two cores fight: after every parallel region OpenMP's workers spin for
// milliseconds, just when OpenBLAS's threads want those cores (an im2col conv ran 2-4x slower than its
// bare GEMM that way). One pool also makes omp_set_num_threads (the backend's thread count) the one knob.
//
// Work is shared out dynamically, in pieces cut by shape alone (never by thread count, so any thread
// count gives the same bits): a region ends at a barrier, and a thread that shares its core with another
// process would hold the others back for its whole static share. How many threads run is the CPU
// backend's choice: fewer while other processes keep CPUs busy.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <cstdint>

namespace rtvd::cpu {

// The `if` clause of the ops' parallel loops: below this many elements one thread does the work, since a
// parallel region would cost more than it saves.
constexpr int64_t kParallelElements = int64_t(1) << 15;

// Call before an op's first BLAS call; free after the first time.
inline void use_single_threaded_blas() {
  static const bool done = (openblas_set_num_threads(1), true);
  (void)done;
}

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// The chunk of the ops' dynamic loops, for iterations that write `elements` each: ~16K elements (a few
// microseconds), so that taking a chunk (one atomic) costs nothing beside it, and every loop big enough
// for a parallel region (kParallelElements) has at least two chunks.
inline int chunk_for(int64_t elements) {
  constexpr int64_t kChunkElements = kParallelElements / 2;
  return int(std::max<int64_t>(kChunkElements / std::max<int64_t>(elements, 1), 1));
}

}  // namespace rtvd::cpu
