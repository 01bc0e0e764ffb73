// Ways to make writes fail, for the tests of what a recording does when the disk is full: a real small file
// system (needs root), and a file-size limit (any user).
#pragma once
#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <string>

namespace rtvd::test {

// A tmpfs of `bytes` mounted on dir (created) for the object's life. Mounting needs CAP_SYS_ADMIN: where it
// is refused, mounted() is false and why_not() says why, for GTEST_SKIP.
class SmallFilesystem {
 public:
  SmallFilesystem(const std::filesystem::path& dir, uint64_t bytes);
  ~SmallFilesystem();  // unmounts, lazily: a file still open elsewhere does not keep it mounted
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }
  void fill() const;  // writes dir/filler until no byte is left

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string why_not_;
};

// RLIMIT_FSIZE lowered to `bytes` for the object's life, with SIGXFSZ ignored, so a write past the limit
// fails with EFBIG instead of killing the test. A child started meanwhile keeps the limit; run_program
// (process.h) gives it SIGXFSZ's default action, as `ulimit -f` in a shell leaves it.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_{};
  void (*previous_handler_)(int) = SIG_DFL;
};

}  // namespace rtvd::test
