// The CPU backend's thread count (pipeline/backends/cpu_threads.h): the choice from other processes'
// load, the parsing of /proc/stat and cgroup limits, and that the frames do not depend on it.
#include <gtest/gtest.h>

#include "pipeline/backends/cpu_threads.h"
#include "pipeline/engine.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

TEST(CpuThreads, ACpuCountsWhileThreeQuartersOfItAreFree) {
  EXPECT_EQ(threads_for_load(2, 0.0), 2);
  EXPECT_EQ(threads_for_load(2, 0.2), 2);
  EXPECT_EQ(threads_for_load(2, 0.3), 1);
  EXPECT_EQ(threads_for_load(2, 1.0), 1);  // `yes` on one of two cores
  EXPECT_EQ(threads_for_load(2, 7.5), 1);  // never fewer than one
  EXPECT_EQ(threads_for_load(16, 1.0), 15);
  EXPECT_EQ(threads_for_load(16, 1.3), 14);
  EXPECT_EQ(threads_for_load(16, -0.1), 16);  // our own time measured a tick more than the system's
  EXPECT_EQ(threads_for_load(1, 0.0), 1);
}

TEST(CpuThreads, BusyTicksOfTheCpusInTheSet) {
  // Fields: user nice system idle iowait irq softirq steal guest guest_nice. Busy: all but idle and iowait,
  // and guest time, which user already holds.
  const std::string stat =
      "cpu  9 9 9 9 9 9 9 9 9 9\n"
      "cpu0 100 1 20 5000 7 2 3 4 50 0\n"
      "cpu1 10 0 5 9000 0 0 0 0 0 0\n"
      "cpu12 1 1 1 1 1 1 1 1 1 1\n"
      "intr 123 4 5\n"
      "ctxt 999\n";
  std::vector<bool> set(16, false);
  set[0] = true;
  EXPECT_EQ(busy_ticks(stat, set), 100 + 1 + 20 + 2 + 3 + 4);
  set[1] = true;
  EXPECT_EQ(busy_ticks(stat, set), 130 + 15);
  set[12] = true;
  EXPECT_EQ(busy_ticks(stat, set), 145 + 6);
  EXPECT_EQ(busy_ticks(stat, std::vector<bool>(16, false)), -1) << "no CPU of the set listed";
  EXPECT_EQ(busy_ticks("cpu0 1 2\n", std::vector<bool>(4, true)), -1) << "a truncated line";
  EXPECT_EQ(busy_ticks("", std::vector<bool>(4, true)), -1);
}

TEST(CpuThreads, CgroupLimitInWholeCpus) {
  EXPECT_EQ(parse_cpu_max("max 100000\n"), 0);
  EXPECT_EQ(parse_cpu_max("200000 100000\n"), 2);
  EXPECT_EQ(parse_cpu_max("150000 100000"), 2);
  EXPECT_EQ(parse_cpu_max("50000 100000"), 1);
  EXPECT_EQ(parse_cpu_max(""), 0);
  EXPECT_EQ(parse_cpu_max("-1 100000"), 0);
}

TEST(CpuThreads, RequestedCountIsKept) {
  const CpuThreads fixed(3);
  EXPECT_FALSE(fixed.adaptive());
  EXPECT_EQ(fixed.most(), 3);
  CpuThreads chosen(0);
  EXPECT_GE(chosen.most(), 1);
  const int n = chosen.for_frame();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, chosen.most());
}

// The ops cut their work by shape alone, so any thread count gives the same bits: the count chosen by
// load may change between frames without changing a frame.
TEST(CpuThreads, FramesAreTheSameBitsForAnyThreadCount) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  FrameSettings s;
  s.seed = rng.gen();
  s.steps = 2;
  std::vector<std::vector<uint8_t>> frames[2];
  const int counts[2] = {1, 3};  // 3: threads that take unequal numbers of pieces
  for (int i = 0; i < 2; ++i) {
    EngineOptions o;
    o.device = DeviceKind::Cpu;
    o.threads = counts[i];
    Engine engine(o);
    engine.configure(s, false);
    for (int f = 0; f < 2; ++f) frames[i].push_back(engine.render(nullptr).pixels);
  }
  EXPECT_EQ(frames[0][0], frames[1][0]);
  EXPECT_EQ(frames[0][1], frames[1][1]);
}

}  // namespace
}  // namespace rtvd
