// The one exception type of rtvd. Messages say what failed and where: file, op, tensor, CUDA call.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace rtvd {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream s;
  (s << ... << std::forward<Args>(args));
  return s.str();
}

template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

}  // namespace rtvd
