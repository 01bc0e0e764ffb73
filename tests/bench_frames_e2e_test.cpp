// rtvd bench frames on the CPU, through the binary: its numbers have three significant digits, the
// profiler's overhead is never negative, and the CPU, whose ops no ceiling measured once bounds (they ran at
// 112% of an sgemm "peak"), gets no "% peak" but the reason; the JSON says the same.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/process.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

TEST(BenchFramesE2E, OnTheCpuRatesHaveThreeDigitsNoPeakAndTheOverheadIsNotNegative) {
  const test::TempDir temp("rtvd_bench_frames");
  const std::string json = temp.path("frames.json");
  const test::RunResult r = test::run_program(
      test::rtvd_binary(), {"bench", "frames", "--device", "cpu", "--size", "32", "--steps", "1", "--frames", "3",
                            "--json", json},
      test::environment(), temp.dir(), 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("frame: (\\S+) ms median over 3 frames = (\\S+) frames/s")))
      << r.out;
  EXPECT_EQ(test::significant_digits(m[1]), std::stod(m[1]) >= 1000 ? int(m[1].length()) : 3) << m[0];
  EXPECT_EQ(test::significant_digits(m[2]), std::stod(m[2]) >= 1000 ? int(m[2].length()) : 3) << m[0];
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("with per-op profiling: \\S+ ms \\(overhead ([^)]*)\\)"))) << r.out;
  EXPECT_TRUE(std::regex_match(m[1].str(), std::regex("[0-9.]+%|none measurable: .*"))) << m[0];

  int rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch row;  // op, calls, total ms, % frame, rate, unit, % peak
    if (!std::regex_match(line, row, std::regex("(\\w+) +\\d+ +[0-9.]+ +[0-9.]+ +([0-9.]+) (TFLOP/s|GB/s) +(\\S+)")))
      continue;
    ++rows;
    EXPECT_EQ(test::significant_digits(row[2]), 3) << line;
    EXPECT_EQ(row[4], "-") << "no % peak on the CPU: " << line;
  }
  EXPECT_GT(rows, 5) << r.out;
  EXPECT_NE(r.out.find("\n% peak: none ("), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("peaks measured"), std::string::npos) << r.out;

  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  EXPECT_GE(doc.at("profiler_overhead_percent").get<double>(), 0.0);
  EXPECT_TRUE(doc.at("ceilings").contains("none")) << doc.at("ceilings");
  EXPECT_FALSE(doc.at("ceilings").contains("gemm_tflops")) << doc.at("ceilings");
}

// --img2img --skip-similar: the fixed image is the same every frame, so every timed frame of the filter's run
// is skipped; the line and the JSON say so, and the frames without the filter are timed as before.
TEST(BenchFramesE2E, SkipSimilarReportsTheSkippedFraction) {
  const test::TempDir temp("rtvd_bench_frames_skip");
  const std::string json = temp.path("frames.json");
  const test::RunResult r = test::run_program(
      test::rtvd_binary(), {"bench", "frames", "--device", "cpu", "--size", "32", "--steps", "1", "--frames", "3",
                            "--img2img", "--skip-similar", "0.999", "--json", json},
      test::environment(), temp.dir(), 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("with --skip-similar 0.999: \\S+ ms median = \\S+ frames/s, 100% of "
                                                  "the frames skipped\n")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("frame: \\S+ ms median over 3 frames"))) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  EXPECT_EQ(doc.at("skip_similar").at("skipped_fraction").get<double>(), 1.0);
  EXPECT_FLOAT_EQ(doc.at("skip_similar").at("threshold").get<float>(), 0.999f);
  EXPECT_GT(doc.at("skip_similar").at("frames_per_second").get<double>(), 0.0);
}

// A stream batch over several steps: its first calls bring no frame out (the groups before the first one that
// leaves), and bench frames times from the first one that does, reporting the latency.
TEST(BenchFramesE2E, AStreamBatchOverSeveralStepsIsTimedFromItsFirstFrameOut) {
  const test::TempDir temp("rtvd_bench_frames_stream");
  const std::string json = temp.path("frames.json");
  const test::RunResult r = test::run_program(
      test::rtvd_binary(), {"bench", "frames", "--device", "cpu", "--size", "32", "--steps", "2", "--stream-batch",
                            "4", "--frames", "4", "--json", json},
      test::environment(), temp.dir(), 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("stream batch 4: 2 frames per call of the U-Net, each out 3 frames after its source"),
            std::string::npos) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  EXPECT_EQ(doc.at("stream_batch"), 4);
  EXPECT_EQ(doc.at("frames_per_call"), 2);
  EXPECT_EQ(doc.at("latency_frames"), 3);
  EXPECT_GT(doc.at("frames_per_second").get<double>(), 0.0);
}

// bench unet on the CPU: TFLOP/s with three digits, and no peak or floor drawn from a ceiling it has not.
TEST(BenchFramesE2E, BenchUnetOnTheCpuGivesNoPeak) {
  const test::TempDir temp("rtvd_bench_unet_cpu");
  const test::RunResult r =
      test::run_program(test::rtvd_binary(),
                        {"bench", "unet", "--config", test::test_data("sd15_small"), "--device", "cpu", "--runs", "1"},
                        test::environment(), temp.dir(), 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("GFLOP, (\\S+) TFLOP/s\n"))) << r.out;
  EXPECT_EQ(test::significant_digits(m[1]), 3) << m[0];
  EXPECT_EQ(r.out.find("peak"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rtvd
