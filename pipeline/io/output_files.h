// What the recorders share: the output directory (made when missing, removed again when a recording is
// abandoned), the words for a failed write (its cause and the free space), and the frame size check.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/io/image.h"

namespace rtvd {

// The directory output goes into: created when missing, remembering which levels were created so an
// abandoned recording can remove them again (only while empty: never anything it did not create). Checks
// up front, by creating a file, that it can be written; throws an Error naming output otherwise.
class OutputDirectory {
 public:
  OutputDirectory(const std::string& output, const std::filesystem::path& dir);
  const std::filesystem::path& path() const { return path_; }
  void remove_created() noexcept;

 private:
  std::filesystem::path path_;
  std::vector<std::filesystem::path> created_;  // outermost first
};

// Checks up front, before the work whose result goes there, that a file can be written at path: it is not a
// directory, and it can be opened for writing or its directory takes a new file. Writes nothing. An Error
// "<label>: <cause>" otherwise.
void check_file_writable(const std::string& label, const std::filesystem::path& path);

// "disk full (no space left on device)" for ENOSPC, and so on: what a failed write's errno means to a user.
std::string write_error_cause(int err);
// "1.5 MiB free in out" (statvfs: the space an unprivileged writer may still use), or "" when unknown.
std::string free_space_text(const std::filesystem::path& dir);

// An Error naming path unless frame is width x height RGBA.
void check_frame_size(const std::string& path, const ImageRgba8& frame, int width, int height);

}  // namespace rtvd
