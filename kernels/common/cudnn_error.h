// cuDNN status checks for the *_cudnn.cu launchers: the call, file and line, cuDNN's status and, for the
// backend API whose statuses say little, the library's own last error message.
#pragma once
#include <cudnn.h>

#include "base/error.h"

namespace rtvd {

inline void cudnn_check(cudnnStatus_t s, const char* what, const char* file, int line) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  fail(what, " failed at ", file, ":", line, ": ", cudnnGetErrorString(s), detail[0] ? " (" : "", detail,
       detail[0] ? ")" : "");
}

}  // namespace rtvd

#define RTVD_CUDNN_CHECK(call) ::rtvd::cudnn_check((call), #call, __FILE__, __LINE__)
