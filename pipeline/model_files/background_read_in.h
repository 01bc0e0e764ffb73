// A file mapping's pages brought in on a thread of its own, as MAP_POPULATE would at mmap() time but
// without waiting: the disk streams a large checkpoint (a 1.7 GB U-Net: ~1.1 s from a cold page cache)
// while the engine goes on making the CUDA context and uploading what is already in. A page read before
// the thread gets to it faults in on the reader's thread, as in any mapping.
#pragma once
#include <atomic>
#include <cstddef>
#include <thread>

namespace rtvd {

class BackgroundReadIn {
 public:
  BackgroundReadIn(const void* address, size_t bytes);  // address: page-aligned (an mmap()'s)
  ~BackgroundReadIn();  // stops at the next step and joins: call before unmapping
  BackgroundReadIn(const BackgroundReadIn&) = delete;
  BackgroundReadIn& operator=(const BackgroundReadIn&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rtvd
