#include "pipeline/size_note.h"

#include "base/error.h"

namespace rtvd {

std::string size_note(int n, int width, int height) {
  if (width == n && height == n) return "";
  return cat("note: the model was trained at ", n, "x", n, "; at ", width, "x", height,
             " it gives poor images (leave out --size for ", n, "x", n, ")");
}

}  // namespace rtvd
