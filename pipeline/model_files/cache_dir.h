// rtvd's cache folder: $RTVD_CACHE_DIR, else $XDG_CACHE_HOME/rtvd, else $HOME/.cache/rtvd ("" when none is
// set). The autotuner keeps its choices there, and --vae tiny looks for TAESD in it.
#pragma once
#include <string>

namespace rtvd {

std::string rtvd_cache_dir();

}  // namespace rtvd
