#include "process_clock.h"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace rtvd {

double seconds_since_process_start() {
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) ": field 3 onwards
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {}
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  return double(now.tv_sec) + now.tv_nsec * 1e-9 - std::stod(field) / double(sysconf(_SC_CLK_TCK));
}

}  // namespace rtvd
