#include "pipeline/io/file_sink.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace rtvd {

namespace {

// Whether a writer holds path's lock: a live recording, not one that a killed process left.
bool locked_by_a_writer(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  const bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return locked;
}

}  // namespace

FileSink::FileSink(const std::string& output, std::string path) : path_(std::move(path)) {
  // O_EXCL: a file of this name is another rtvd's recording in progress, or what an earlier one left when it
  // was killed, which may hold the only copy of that recording. The lock, held while the file is open (the
  // kernel lets it go when the process dies), tells the two apart. Another rtvd probing between the open and
  // the flock, or between close() and the recorder's rename, sees a file left over: a window of microseconds.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ >= 0) {
    // Waits only for a probe of locked_by_a_writer, which lets go at once. Where the file system has no locks,
    // the file stays unlocked, and another rtvd says it is left over.
    ::flock(fd_, LOCK_EX);
    return;
  }
  if (errno != EEXIST) fail(output, ": cannot create '", path_, "': ", std::strerror(errno));
  if (locked_by_a_writer(path_))
    fail(output, ": another rtvd is writing this output (into '", path_, "'): wait for it to finish, or choose ",
         "another output");
  fail(output, ": '", path_, "' is left from a recording that did not finish (it plays up to where that one ",
       "stopped): move or delete it first");
}

FileSink::~FileSink() {
  if (fd_ >= 0) ::close(fd_);
}

int FileSink::failed(int err) noexcept {
  if (error_ == 0) error_ = err;
  return err;
}

int FileSink::write(const uint8_t* data, size_t bytes) noexcept {
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, data, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return failed(errno);
    }
    data += n;
    bytes -= size_t(n);
    position_ += n;
    end_ = std::max(end_, position_);
  }
  return 0;
}

int FileSink::seek(int64_t offset, int whence, int64_t* position) noexcept {
  const off_t at = ::lseek(fd_, off_t(offset), whence);
  if (at < 0) return failed(errno);
  position_ = *position = at;
  return 0;
}

int FileSink::sync() noexcept { return ::fdatasync(fd_) == 0 ? 0 : failed(errno); }

int FileSink::close() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd < 0 || ::close(fd) == 0 ? 0 : failed(errno);
}

int FileSink::cut_to_complete() noexcept {
  if (fd_ < 0) return 0;
  int err = ::ftruncate(fd_, off_t(complete_)) == 0 ? 0 : errno;
  if (err == 0 && ::fdatasync(fd_) != 0) err = errno;
  if (::close(fd_) != 0 && err == 0) err = errno;
  fd_ = -1;
  return err;
}

}  // namespace rtvd
