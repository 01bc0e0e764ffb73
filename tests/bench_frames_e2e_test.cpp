// rtvd bench frames on the CPU, through the binary: its numbers have three significant digits, the
// profiler's overhead is never negative, and the CPU, whose ops no ceiling measured once bounds (they ran at
// 112% of an sgemm "peak"), gets no "% peak" but the reason; the JSON says the same.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/bench_source.h"
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

// --moving: each frame is the last one's window moved kPanX right and kPanY down over one picture (the rows and
// columns the two share are equal), so no two consecutive frames are equal; a group of frames made in one call
// is the same as one at a time, and rewind starts the pan over. Without --moving: one fixed image.
TEST(BenchFramesE2E, TheMovingSourcePansAndTheStillOneStaysStill) {
  const int w = 24, h = 16, c = 3;
  BenchSource pan(w, h, c, true), still(w, h, c, false);
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 40; ++i) frames.push_back(*pan.next(1).front());  // past the picture's width: the wrap
  for (size_t t = 1; t < frames.size(); ++t) {
    const std::vector<uint8_t>& a = frames[t - 1];
    const std::vector<uint8_t>& b = frames[t];
    ASSERT_NE(a, b) << "frame " << t;
    for (int y = 0; y + BenchSource::kPanY < h; ++y)
      for (int x = 0; x + BenchSource::kPanX < w; ++x)
        for (int k = 0; k < c; ++k)
          ASSERT_EQ(b[(size_t(y) * w + x) * c + k],
                    a[(size_t(y + BenchSource::kPanY) * w + x + BenchSource::kPanX) * c + k])
              << "frame " << t << " at " << x << ", " << y;
  }
  pan.rewind();
  const std::vector<const std::vector<uint8_t>*> group = pan.next(4);
  for (size_t i = 0; i < group.size(); ++i) EXPECT_EQ(*group[i], frames[i]) << "frame " << i << " of a group";
  const std::vector<uint8_t> fixed = *still.next(1).front();
  EXPECT_EQ(*still.next(3).back(), fixed);
  EXPECT_NE(fixed, std::vector<uint8_t>(fixed.size(), fixed.front()));
}

// --img2img --moving --feature-cache 2: after the timing, the same frames with and without the cache from the
// same start, the error of each cached-run frame against the uncached one. The first frame is full and has no
// history in both runs: equal (bit-exact on the CPU). The cached frames differ (and, through the blend with the
// frame before, so may the later full ones). The summary is that of the list.
TEST(BenchFramesE2E, OnAMovingSourceTheFeatureCacheReportsItsErrorPerFrame) {
  const test::TempDir temp("rtvd_bench_frames_moving");
  const std::string json = temp.path("frames.json");
  const test::RunResult r = test::run_program(
      test::rtvd_binary(), {"bench", "frames", "--device", "cpu", "--size", "32", "--steps", "1", "--frames", "4",
                            "--img2img", "--moving", "--feature-cache", "2", "--cache-similarity", "0", "--json", json},
      test::environment(), temp.dir(), 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("img2img, moving source (a pan)"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("feature cache error against the uncached frames, 4 frames of the "
                                                  "moving source from the same start \\(2 of them full, 0 of those "
                                                  "where the source had moved too far\\): RMS mean \\S+, worst \\S+ of 255 "
                                                  "levels; PSNR \\S+ dB over all frames, worst \\S+ dB; per frame "
                                                  "\\(RMS / PSNR dB\\): 0 / inf, ")))
      << r.out;
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  EXPECT_TRUE(doc.at("moving").get<bool>());
  const nlohmann::json& fc = doc.at("feature_cache");
  EXPECT_EQ(fc.at("refresh"), 2);
  EXPECT_EQ(fc.at("error_frames"), 4);
  const std::vector<double> rms = fc.at("rms_levels").get<std::vector<double>>();
  const nlohmann::json& psnr = fc.at("psnr_db");
  ASSERT_EQ(rms.size(), 4u);
  ASSERT_EQ(psnr.size(), 4u);
  EXPECT_EQ(rms[0], 0.0) << "the first frame is full in both runs";
  EXPECT_TRUE(psnr[0].is_null()) << "equal frames: no finite PSNR";
  double worst = 0;
  for (size_t i = 0; i < rms.size(); ++i) {
    ASSERT_TRUE(std::isfinite(rms[i]) && rms[i] >= 0 && rms[i] <= 255) << "frame " << i << ": " << rms[i];
    if (rms[i] > 0) EXPECT_NEAR(psnr[i].get<double>(), 20 * std::log10(255 / rms[i]), 1e-9) << "frame " << i;
    worst = std::max(worst, rms[i]);
  }
  EXPECT_GT(rms[1], 0.0) << "frame 1 runs the cached U-Net";
  EXPECT_DOUBLE_EQ(fc.at("rms_levels_worst").get<double>(), worst);
  EXPECT_NEAR(fc.at("rms_levels_mean").get<double>(), std::accumulate(rms.begin(), rms.end(), 0.0) / 4, 1e-12);
  EXPECT_NEAR(fc.at("psnr_db_worst").get<double>(), 20 * std::log10(255 / worst), 1e-9);
  EXPECT_EQ(fc.at("full_frames"), 2);

  // At the default --cache-similarity, this pan (2 px a frame at 32x32) moves too far for the cache every frame:
  // every frame is full, the first by the start and the others by their source, and equal to the uncached one.
  const test::RunResult d = test::run_program(
      test::rtvd_binary(), {"bench", "frames", "--device", "cpu", "--size", "32", "--steps", "1", "--frames", "3",
                            "--img2img", "--moving", "--feature-cache", "2", "--json", json},
      test::environment(), temp.dir(), 300);
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  const nlohmann::json by_source = nlohmann::json::parse(test::read_file(json)).at("feature_cache");
  EXPECT_EQ(by_source.at("full_frames"), 3);
  EXPECT_EQ(by_source.at("source_refreshes"), 2);
  EXPECT_EQ(by_source.at("rms_levels_worst").get<double>(), 0.0);
}

// --img2img --moving --skip-similar: a pan moves every pixel every frame, so the filter skips none.
TEST(BenchFramesE2E, OnAMovingSourceSkipSimilarSkipsNothing) {
  const test::TempDir temp("rtvd_bench_frames_moving_skip");
  const std::string json = temp.path("frames.json");
  const test::RunResult r = test::run_program(
      test::rtvd_binary(), {"bench", "frames", "--device", "cpu", "--size", "32", "--steps", "1", "--frames", "3",
                            "--img2img", "--moving", "--skip-similar", "0.999", "--json", json},
      test::environment(), temp.dir(), 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("with --skip-similar 0.999: \\S+ ms median = \\S+ frames/s, 0% of "
                                                  "the frames skipped\n")))
      << r.out;
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  EXPECT_EQ(doc.at("skip_similar").at("skipped_fraction").get<double>(), 0.0);
  EXPECT_EQ(doc.at("feature_cache").at("refresh"), 0);
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
