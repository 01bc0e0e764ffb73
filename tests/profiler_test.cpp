// The per-op profile: aggregation by op type, the Chrome trace it writes, and per-op times from the CPU
// backend for every frame op.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "pipeline/engine.h"
#include "base/error.h"
#include "pipeline/backends/profiler.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

std::vector<Op> three_ops() {
  std::vector<Op> ops(3);
  ops[0] = Op{"a.conv1", ConvOp{}, 2e9, 1e6};
  ops[1] = Op{"a.conv2", ConvOp{}, 4e9, 1e6};
  ops[2] = Op{"a.norm", GroupNormOp{}, 0, 8e6};
  return ops;
}

TEST(Profiler, AggregatesPerOpTypeAndLayer) {
  const std::vector<Op> ops = three_ops();
  FrameProfile p;
  p.add_frame(ops, {1.0f, 3.0f, 0.5f});
  p.add_frame(ops, {3.0f, 1.0f, 1.5f});
  EXPECT_EQ(p.frames(), 2);
  EXPECT_DOUBLE_EQ(p.mean_frame_ms(), 5.0);
  const auto rows = p.by_type();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].type, "conv2d");  // slowest first
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(rows[0].ms, 4.0);
  EXPECT_DOUBLE_EQ(rows[0].flops, 6e9);
  EXPECT_DOUBLE_EQ(rows[1].ms, 1.0);
  EXPECT_EQ(p.slowest_layers(1).at(0).first, "a.conv1");
  // 6 GFLOP in 4 ms = 1.5 TFLOP/s, half of a 3 TFLOP/s peak
  const std::string table = p.table(Ceilings{3.0, 100.0, "gemm", "copy"});
  EXPECT_NE(table.find("1.50 TFLOP/s"), std::string::npos) << table;
  EXPECT_NE(table.find(" 50\n"), std::string::npos) << table;
  EXPECT_THROW(p.add_frame(ops, {1.0f}), Error);
}

// An op that is off (Op::off) in a frame did no work in it: it takes no time, whatever the backend measured
// around it (on the GPU its event nodes' own cost), and its type's rate is that of the ops that ran. An op off in
// every profiled frame is no call and in no row.
TEST(Profiler, OpsThatAreOffDoNoWork) {
  std::vector<Op> ops = three_ops();
  FrameProfile p;
  p.add_frame(ops, {1.0f, 1.0f, 0.5f});
  ops[1].off = true;
  p.add_frame(ops, {1.0f, 0.25f, 0.5f});
  auto rows = p.by_type();
  ASSERT_EQ(rows.at(0).type, "conv2d");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(rows[0].ms, 1.5);
  EXPECT_DOUBLE_EQ(rows[0].flops, 4e9);  // per frame: 6 GFLOP, then 2
  EXPECT_DOUBLE_EQ(p.by_stage().at(0).flops, 4e9);
  EXPECT_DOUBLE_EQ(p.mean_frame_ms(), 2.0);  // 2.5 ms, then 1.5

  FrameProfile never_on;
  never_on.add_frame(ops, {1.0f, 0.25f, 0.5f});
  ops[2].off = true;
  never_on.add_frame(ops, {1.0f, 0.25f, 0.125f});
  rows = never_on.by_type();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].type, "conv2d");
  EXPECT_EQ(rows[0].calls, 1) << "a.conv2 never ran";
  EXPECT_DOUBLE_EQ(rows[0].ms, 1.0);
  EXPECT_EQ(rows[1].type, "group_norm");
  EXPECT_DOUBLE_EQ(rows[1].ms, 0.25);  // 0.5 ms in the one frame it ran, over two frames
  EXPECT_EQ(never_on.slowest_layers(3).back(), (std::pair<std::string, double>{"a.conv2", 0.0}));
}

// From 1e-6 to 1e6, drawn afresh: three significant digits, no exponent, within half a unit of the third
// digit; from 1000 on, the integer.
TEST(Profiler, ThreeDigitsKeepsThreeSignificantDigits) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int i = 0; i < 5000; ++i) {
    const double v = std::pow(10.0, rng.uniform(-6.0f, 6.0f));
    const std::string text = three_digits(v);
    SCOPED_TRACE(cat(v, " -> ", text));
    ASSERT_EQ(text.find_first_of("eE"), std::string::npos);
    const double back = std::stod(text);
    if (back >= 1000) {
      EXPECT_EQ(text.find('.'), std::string::npos);
      EXPECT_LE(std::fabs(back - v), 0.5);
    } else {
      EXPECT_EQ(test::significant_digits(text), 3);
      EXPECT_LE(std::fabs(back - v), 0.5 * std::pow(10.0, std::floor(std::log10(v)) - 2) * (1 + 1e-9) + 1e-12 * v);
    }
  }
}

// A table's cells, by row: the op type's row split on spaces.
std::vector<std::vector<std::string>> table_rows(const std::string& table) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string cell; cells >> cell;) row.push_back(cell);
    if (row.size() >= 2 && (row.front() == "conv2d" || row.front() == "group_norm")) rows.push_back(row);
  }
  return rows;
}

// Random times: every rate has three significant digits; with ceilings each op's share of them, without
// (the CPU's) no "% peak" and the reason instead.
TEST(Profiler, TableRatesHaveThreeDigitsAndAPeakOnlyWhereThereAreCeilings) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<Op> ops = three_ops();
  FrameProfile p;
  for (int f = 0; f < 3; ++f) p.add_frame(ops, rng.vector(3, 0.01f, 50.0f));
  const std::string none = p.table(Ceilings{.none = "no ceiling here"});
  const std::string measured = p.table(Ceilings{1e3, 1e4, "gemm", "copy"});
  for (const bool ceilings : {false, true}) {
    const std::string& table = ceilings ? measured : none;
    const auto rows = table_rows(table);
    ASSERT_EQ(rows.size(), 2u) << table;
    for (const auto& row : rows) {
      ASSERT_EQ(row.size(), 7u) << table;  // op, calls, ms, % frame, rate, unit, % peak
      EXPECT_EQ(test::significant_digits(row[4]), 3) << row[4];
      EXPECT_EQ(row[6] == "-", !ceilings) << table;
    }
  }
  EXPECT_NE(none.find("% peak: none (no ceiling here)\n"), std::string::npos) << none;
  EXPECT_EQ(none.find("peaks measured"), std::string::npos) << none;
  EXPECT_NE(measured.find("peaks measured now: 1000 TFLOP/s (gemm), 10000 GB/s (copy)\n"), std::string::npos) << measured;
}

TEST(Profiler, WritesAChromeTraceOfTheLastFrame) {
  const std::vector<Op> ops = three_ops();
  FrameProfile p;
  p.add_frame(ops, {1.0f, 2.0f, 0.25f});
  test::TempDir tmp("rtvd_profiler_test");
  p.write_chrome_trace(tmp.path("trace.json"), ops);
  const auto doc = nlohmann::json::parse(std::ifstream(tmp.path("trace.json")));
  const auto& events = doc.at("traceEvents");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].at("name"), "a.conv2");
  EXPECT_EQ(events[1].at("cat"), "conv2d");
  EXPECT_DOUBLE_EQ(events[1].at("ts").get<double>(), 1000.0);  // after the first op, in microseconds
  EXPECT_DOUBLE_EQ(events[1].at("dur").get<double>(), 2000.0);
  EXPECT_THROW(p.write_chrome_trace("/proc/rtvd/trace.json", ops), Error);
}

// A latent frame's stages, in frame order: the encoder and the image it reads, the U-Net, the sampler's steps,
// the decoder with the blend after it.
TEST(Profiler, AggregatesPerStage) {
  const std::vector<std::string> layers = {"image", "encoder.conv_in", "quant_conv", "sampler.start",
                                           "down_blocks.0.resnets.0.conv1", "sampler.step0", "post_quant_conv",
                                           "decoder.conv_out", "decoded+blend+rgba8"};
  std::vector<Op> ops;
  std::vector<float> ms;
  for (size_t i = 0; i < layers.size(); ++i) {
    ops.push_back(Op{layers[i], ConvOp{}, 1e9, 0});
    ms.push_back(float(i + 1));
  }
  FrameProfile p;
  p.add_frame(ops, ms);
  const auto stages = p.by_stage();
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0].type, "encode");
  EXPECT_DOUBLE_EQ(stages[0].ms, 1 + 2 + 3);
  EXPECT_EQ(stages[1].type, "sampler");
  EXPECT_DOUBLE_EQ(stages[1].ms, 4 + 6);
  EXPECT_EQ(stages[2].type, "U-Net");
  EXPECT_DOUBLE_EQ(stages[2].ms, 5);
  EXPECT_EQ(stages[3].type, "decode");
  EXPECT_DOUBLE_EQ(stages[3].ms, 7 + 8 + 9);
  EXPECT_EQ(stages[3].calls, 3);
}

TEST(Profiler, CpuBackendTimesEveryFrameOp) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.model.path = test::test_data("tiny_batch");
  Engine engine(o);
  EXPECT_TRUE(engine.backend().frame_op_ms().empty());
  engine.backend().set_profiling(true);
  engine.render(nullptr);
  const std::vector<float> ms = engine.backend().frame_op_ms();
  ASSERT_EQ(ms.size(), engine.plan().graph.frame.size());
  double total = 0;
  for (float m : ms) {
    EXPECT_GE(m, 0.0f);
    total += m;
  }
  EXPECT_GT(total, 0.0);
  EXPECT_NEAR(engine.backend().frame_gpu_ms(), total, 1e-3 * total);
  EXPECT_TRUE(engine.backend().frame_op_ms().empty()) << "each frame's times are given once";
}

}  // namespace
}  // namespace rtvd
