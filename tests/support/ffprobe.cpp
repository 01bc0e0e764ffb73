#include "support/ffprobe.h"

#include <cstdio>
#include <cstdlib>

namespace rtvd::test {

namespace {

// stdout of `command`, its complaints discarded: ffprobe reports what it could read of a file that ends
// mid-way (a killed recording's last fragment) and then exits non-zero, and the count is what matters.
std::string output_of(const std::string& command) {
  std::FILE* p = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  return out;
}

// Single-quoted for the shell.
std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

bool ffprobe_available() { return std::system("ffprobe -version > /dev/null 2>&1") == 0; }

int ffprobe_frame_count(const std::string& path) {
  const std::string n = trimmed(output_of("ffprobe -v error -count_frames -select_streams v:0 -show_entries "
                                          "stream=nb_read_frames -of csv=p=0 " + quoted(path)));
  if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::atoi(n.c_str());
}

std::string ffprobe_stream_entry(const std::string& path, const std::string& entry) {
  return trimmed(output_of("ffprobe -v error -select_streams v:0 -show_entries stream=" + entry +
                           " -of csv=p=0 " + quoted(path)));
}

}  // namespace rtvd::test
