// Threading of the CPU backend: OpenMP's threads are the only ones. OpenBLAS (a pthreads build, with a
// pool of its own) is made single-threaded and called from inside OpenMP regions, each thread on its
// share of a GEMM. Two pools on two cores fight: after every parallel region OpenMP's workers spin for
// milliseconds, just when OpenBLAS's threads want those cores (an im2col conv ran 2-4x slower than its
// bare GEMM that way). One pool also makes omp_set_num_threads (the backend's --threads) the one knob.
#pragma once
#include <cblas.h>
#include <omp.h>

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

// The calling thread's share of [0, total) in the current parallel region (all of it outside one);
// boundaries fall on multiples of align, so that threads do not write to the same cache line.
inline Range thread_share(int64_t total, int64_t align = 1) {
  const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
  const int64_t units = (total + align - 1) / align;
  Range r{units * t / threads * align, units * (t + 1) / threads * align};
  if (r.end > total) r.end = total;
  if (r.begin > total) r.begin = total;
  return r;
}

}  // namespace rtvd::cpu
