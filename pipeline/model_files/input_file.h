// Files that a user names and rtvd reads (configs, tokenizer files, images, videos) must be regular files: a
// FIFO blocks its reader until something writes into it, and a device such as /dev/zero never ends. What a
// path is instead is said in a user's words, as is a path that cannot be looked at (a symlink loop).
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace rtvd {

// "" when path is a regular file (symlinks followed); else what it is or why it cannot be looked at: "no such
// file", "is a directory", "is not a regular file (a FIFO)", "too many levels of symbolic links". Opens nothing.
std::string regular_file_problem(const std::string& path);

// An Error "<path>: <missing>" when path does not exist ("no such image file"), "<path>: <problem>" when it is
// anything but a regular file.
void require_regular_file(const std::string& path, const std::string& missing);

// The whole of path, a regular file: an Error naming it when it is not one, cannot be read, or holds more than
// max_bytes ("N bytes, expected <what> of at most max_bytes bytes"; no more than max_bytes + 1 are read).
std::string read_regular_file(const std::string& path, size_t max_bytes, std::string_view what);

// "<path>: too many levels of symbolic links": a std::filesystem error as a one-line message.
std::string filesystem_error_text(const std::filesystem::filesystem_error& e);

// An error code's text as it reads inside a message: "too many levels of symbolic links".
std::string error_text(const std::error_code& ec);

}  // namespace rtvd
