// Plans a library makes once per layer shape and keeps (cuDNN's convolution descriptors and its compiled
// attention graphs: making one costs milliseconds to a second of host time, so never per frame). Owned by
// whoever owns the library handle (the CUDA host module), reached by the candidates through
// CudaContext::plans. Type-erased, so that kernels/common knows no library. Thread-safe; plans never move.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace rtvd {

class PlanCache {
 public:
  // The plan under key (which names the op and everything the plan depends on), made by make() at the
  // first ask. make() returns a std::unique_ptr<Plan>, or null where the library can't: remembered too, so
  // a shape the library rejects is asked about once.
  template <class Plan, class Make>
  Plan* get(const std::string& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, std::shared_ptr<void>(make())).first;
    return static_cast<Plan*>(it->second.get());
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    plans_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<void>> plans_;
};

}  // namespace rtvd
