#include "support/write_limits.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace rtvd::test {

SmallFilesystem::SmallFilesystem(const std::filesystem::path& dir, uint64_t bytes) : dir_(dir) {
  std::filesystem::create_directories(dir_);
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
  if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) == 0) {
    mounted_ = true;
  } else {
    why_not_ = "cannot mount a small tmpfs to fill (" + std::string(std::strerror(errno)) + "; needs root)";
  }
}

SmallFilesystem::~SmallFilesystem() {
  if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
}

void SmallFilesystem::fill() const {
  const int fd = ::open((dir_ / "filler").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  const std::vector<char> block(4096, 'x');
  for (size_t size = block.size(); size > 0; size /= 2)
    while (::write(fd, block.data(), size) == ssize_t(size)) {
    }
  ::close(fd);
}

FileSizeLimit::FileSizeLimit(uint64_t bytes) {
  ::getrlimit(RLIMIT_FSIZE, &previous_);
  previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  rlimit lowered = previous_;
  lowered.rlim_cur = bytes;
  ::setrlimit(RLIMIT_FSIZE, &lowered);
}

FileSizeLimit::~FileSizeLimit() {
  ::setrlimit(RLIMIT_FSIZE, &previous_);
  std::signal(SIGXFSZ, previous_handler_);
}

}  // namespace rtvd::test
