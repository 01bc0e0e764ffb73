// One output file written through its descriptor, so that every write's errno is seen (a full disk, a
// file-size limit, a failing device), and so that the file can be cut back to where its last complete unit
// (an MP4 fragment, an MKV cluster) ends: what a failed recording keeps then ends cleanly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace rtvd {

class FileSink {
 public:
  // Creates path, which must not exist yet, and holds an exclusive flock on it until it is closed: an Error
  // naming output when it exists (said apart: another process writing it, or a file left over) or cannot be
  // created.
  FileSink(const std::string& output, std::string path);
  ~FileSink();  // closes the file if close() did not run; keeps it on disk
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // Each returns 0 or an errno; the first failure is kept in error().
  int write(const uint8_t* data, size_t bytes) noexcept;
  int seek(int64_t offset, int whence, int64_t* position) noexcept;  // lseek's whence
  int sync() noexcept;   // fdatasync: what was written survives a power cut
  int close() noexcept;

  int64_t end() const { return end_; }  // the file's size: the furthest byte written
  void mark_complete() { complete_ = end_; }
  int64_t complete() const { return complete_; }
  // After a failure: cuts the file back to the last mark_complete(), syncs and closes it. 0 or an errno.
  int cut_to_complete() noexcept;

  int error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  int failed(int err) noexcept;

  std::string path_;
  int fd_ = -1;
  int64_t position_ = 0, end_ = 0, complete_ = 0;
  int error_ = 0;
};

}  // namespace rtvd
