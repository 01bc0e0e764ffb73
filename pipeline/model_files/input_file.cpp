#include "pipeline/model_files/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "base/error.h"

namespace rtvd {

namespace {

constexpr const char* kNoSuchFile = "no such file";

std::string file_type_problem(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is not a regular file (a FIFO)";
  if (S_ISCHR(mode)) return "is not a regular file (a character device)";
  if (S_ISBLK(mode)) return "is not a regular file (a block device)";
  if (S_ISSOCK(mode)) return "is not a regular file (a socket)";
  return "is not a regular file";
}

struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string error_text(const std::error_code& ec) {
  std::string text = ec.message();
  if (!text.empty()) text[0] = char(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string regular_file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT ? kNoSuchFile : error_text(std::error_code(errno, std::generic_category()));
  return file_type_problem(st.st_mode);
}

void require_regular_file(const std::string& path, const std::string& missing) {
  const std::string problem = regular_file_problem(path);
  if (!problem.empty()) fail(path, ": ", problem == kNoSuchFile ? missing : problem);
}

std::string read_regular_file(const std::string& path, size_t max_bytes, std::string_view what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It changes nothing for the
  // reads of a regular file.
  const FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) fail(path, ": cannot stat: ", std::strerror(errno));
  if (const std::string problem = file_type_problem(st.st_mode); !problem.empty()) fail(path, ": ", problem);
  std::string text;
  char buffer[1 << 16];
  // One byte past the limit is enough to refuse the file, however large it is.
  while (text.size() <= max_bytes) {
    const ssize_t n = ::read(file.fd, buffer, std::min(sizeof buffer, max_bytes + 1 - text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, ": cannot read: ", std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, size_t(n));
  }
  if (text.size() > max_bytes)
    fail(path, ": ", std::max<uint64_t>(uint64_t(st.st_size), text.size()), " bytes, expected ", what,
         " of at most ", max_bytes, " bytes");
  return text;
}

std::string filesystem_error_text(const std::filesystem::filesystem_error& e) {
  if (e.path1().empty()) return error_text(e.code());
  return cat(e.path1().string(), ": ", error_text(e.code()));
}

}  // namespace rtvd
