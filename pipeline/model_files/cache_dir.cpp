#include "pipeline/model_files/cache_dir.h"

#include <cstdlib>

namespace rtvd {

std::string rtvd_cache_dir() {
  if (const char* d = std::getenv("RTVD_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/rtvd";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/rtvd";
  return "";
}

}  // namespace rtvd
