// The progress reporter when stderr is not a terminal (a log, CI): how many lines, and what they say.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

// app/ is compiled into the rtvd executable only, so the test compiles the reporter itself.
#include "app/progress.h"

namespace rtvd {
namespace {

// Runs a reporter over frames 1..frames into a temporary file (not a TTY); returns the lines it wrote.
std::vector<std::string> report(int total, int frames, bool quiet) {
  std::FILE* f = std::tmpfile();
  EXPECT_NE(f, nullptr);
  {
    Progress progress(total, quiet, f);
    for (int i = 1; i <= frames; ++i) progress.update(i);
    progress.finish();
  }
  std::rewind(f);
  std::vector<std::string> lines;
  char buf[256];
  while (std::fgets(buf, sizeof buf, f)) lines.emplace_back(buf);
  std::fclose(f);
  return lines;
}

TEST(Progress, PlainLinesAtEveryTenthOfTheFrames) {
  const auto lines = report(48, 48, false);
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines.front().rfind("[#---------]   5/48 frames  ", 0), 0u) << lines.front();
  EXPECT_EQ(lines.back().rfind("[##########]  48/48 frames  ", 0), 0u) << lines.back();
  EXPECT_NE(lines.back().find(" fps  ETA 0:00\n"), std::string::npos) << lines.back();
  for (const auto& l : lines) EXPECT_EQ(l.find('\r'), std::string::npos) << "no terminal control in a log";
}

TEST(Progress, EveryFrameWhenThereAreFewAndNothingWhenQuiet) {
  const auto lines = report(3, 3, false);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].rfind("[######----]  2/3 frames", 0), 0u) << lines[1];
  EXPECT_TRUE(report(48, 48, true).empty());
}

TEST(Progress, UnknownTotalPrintsCountsEveryTenFrames) {
  const auto lines = report(-1, 25, false);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("10 frames  ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("20 frames  ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[1].find("ETA"), std::string::npos);
}

}  // namespace
}  // namespace rtvd
