#include "pipeline/size_note.h"

#include "kernels/common/error.h"

namespace rtvd {

std::string size_note(const ModelConfig& config, int width, int height) {
  const int n = config.sample_size;
  if (width == n && height == n) return "";
  return cat("note: the model was trained at ", n, "x", n, "; at ", width, "x", height,
             " it gives poor images (leave out --size for ", n, "x", n, ")");
}

}  // namespace rtvd
