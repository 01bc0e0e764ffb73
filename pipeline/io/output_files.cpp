#include "pipeline/io/output_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "base/error.h"
#include "pipeline/model_files/input_file.h"

namespace rtvd {

namespace fs = std::filesystem;

namespace {

// access(W_OK) says yes to root everywhere, and /proc or a read-only mount still refuse files: only
// creating one tells. Returns what is wrong, or "".
std::string check_writable(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (ec) return cat("cannot use directory '", dir.string(), "': ", error_text(ec));
  if (!fs::is_directory(status)) return cat("'", dir.string(), "' is not a directory");
  std::string probe = (dir / ".rtvd-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return cat("cannot write in directory '", dir.string(), "': ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

// "1.5 MiB"
std::string bytes_text(double bytes) {
  char amount[32];
  if (bytes < 1024) std::snprintf(amount, sizeof amount, "%.0f B", bytes);
  else if (bytes < 1024.0 * 1024) std::snprintf(amount, sizeof amount, "%.1f KiB", bytes / 1024);
  else if (bytes < 1024.0 * 1024 * 1024) std::snprintf(amount, sizeof amount, "%.1f MiB", bytes / (1024 * 1024));
  else std::snprintf(amount, sizeof amount, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return amount;
}

// EFBIG: the file system's largest file, or this process's file-size limit, which a user sets (ulimit -f)
// and may not know of.
std::string file_too_large_text() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    return cat("the file reached the largest size allowed: the file size limit (ulimit -f) is ",
               bytes_text(double(limit.rlim_cur)));
  return "the file reached the largest size allowed (file too large)";
}

}  // namespace

OutputDirectory::OutputDirectory(const std::string& output, const fs::path& dir)
    : path_(dir.empty() ? fs::path(".") : dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = path_; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    if (ec) fail(output, ": cannot use directory '", p.string(), "': ", error_text(ec));  // a symlink loop
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (fs::create_directory(*it, ec)) {
      created_.push_back(*it);
    } else if (ec) {
      remove_created();
      fail(output, ": cannot create directory '", it->string(), "': ", ec.message());
    }
  }
  if (const std::string problem = check_writable(path_); !problem.empty()) {
    remove_created();
    fail(output, ": ", problem);
  }
}

void check_file_writable(const std::string& label, const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && status.type() != fs::file_type::not_found) fail(label, ": ", error_text(ec));  // a symlink loop
  if (fs::is_directory(status)) fail(label, ": is a directory, expected a file");
  if (fs::exists(status)) {
    // Opened as the writer will open it, less the truncation; O_NONBLOCK, so that a FIFO does not wait.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail(label, ": cannot write: ", std::strerror(errno));
    ::close(fd);
    return;
  }
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (const std::string problem = check_writable(dir); !problem.empty()) fail(label, ": ", problem);
}

void OutputDirectory::remove_created() noexcept {
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) fs::remove(*it, ec);
}

std::string write_error_cause(int err) {
  switch (err) {
    case ENOSPC: return "disk full (no space left on device)";
    case EDQUOT: return "disk quota exceeded";
    case EFBIG: return file_too_large_text();
    case EIO: return "I/O error (the device failed a write)";
    default: return std::strerror(err);
  }
}

std::string free_space_text(const fs::path& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return "";
  return cat(bytes_text(double(s.f_bavail) * double(s.f_frsize)), " free in ", dir.string());
}

void check_frame_size(const std::string& path, const ImageRgba8& frame, int width, int height) {
  if (frame.width != width || frame.height != height || frame.pixels.size() != size_t(width) * height * 4)
    fail(path, ": frame is ", frame.width, "x", frame.height, " (", frame.pixels.size(), " bytes), expected ",
         width, "x", height, " RGBA, the size the recording was opened with");
}

}  // namespace rtvd
