// rtvd bench unet end to end on the CPU: a scaled-down SD model runs and reports what the GPU run reports
// (time, FLOPs, time to first output, memory, JSON), and what cannot run is one clear error line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/process.h"
#include "support/tensor_files.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

class BenchUnetE2E : public ::testing::Test {
 protected:
  test::RunResult run(std::vector<std::string> args) const {
    args.insert(args.begin(), {"bench", "unet"});
    return test::run_program(test::rtvd_binary(), args, test::environment(), temp_.dir(), 300);
  }
  test::TempDir temp_{"rtvd_bench_unet"};
};

TEST_F(BenchUnetE2E, ScaledDownSdModelOnTheCpu) {
  const std::string json = temp_.path("bench.json");
  const test::RunResult r = run({"--config", test::test_data("sd21_small"), "--device", "cpu", "--batch",
                                 "2", "--runs", "2", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* line : {"rtvd bench unet: sd21_small", "batch 2, 16x16x4 latents, context 77x64", "backend: cpu",
                           "weights: random (seed 0), 3277988 parameters", "forward: ", "ms median of 2",
                           "time to first output: ", "memory: weights ", "output: finite"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " not in:\n" << r.out;

  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  EXPECT_EQ(doc.at("bench"), "unet");
  EXPECT_EQ(doc.at("batch"), 2);
  EXPECT_EQ(doc.at("parameters"), 3277988);
  EXPECT_EQ(doc.at("runs"), 2);
  EXPECT_GT(doc.at("ms_median").get<double>(), 0);
  EXPECT_GT(doc.at("forward_flops").get<double>(), 1e8);
  EXPECT_GT(doc.at("time_to_first_output_s").get<double>(), 0);
  EXPECT_LT(doc.at("time_to_first_output_s").get<double>(), 60);
  EXPECT_EQ(doc.at("weight_bytes").get<size_t>() >= 3277988u * 4, true);
  EXPECT_TRUE(doc.at("output_finite").get<bool>());
  for (const char* key : {"date", "gpu", "driver", "commit", "backend", "ceilings", "steps_s", "activation_bytes"})
    EXPECT_TRUE(doc.contains(key)) << key;
}

// A checkpoint's U-Net alone: the parameters are its unet/ file's elements, not the U-Net's and the VAE's.
TEST_F(BenchUnetE2E, ACheckpointsUnetCountsItsOwnParameters) {
  const std::string json = temp_.path("bench.json");
  const test::RunResult r = run({"--model", test::test_data("tiny_sd"), "--device", "cpu", "--runs", "1", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string unet = test::test_data("tiny_sd/unet/diffusion_pytorch_model.safetensors");
  int64_t elements = 0;
  for (const auto& [name, n] : test::safetensors_elements(unet)) elements += n;
  EXPECT_NE(r.out.find(cat("'s unet (", unet, "), ", elements, " parameters")), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(test::read_file(json)).at("parameters"), elements);
}

TEST_F(BenchUnetE2E, WhatCannotRunIsOneErrorLine) {
  const std::string small = test::test_data("sd15_small");
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--config", "sd99"}, "rtvd: error: config 'sd99': neither a built-in config (sd21, sd15)"},
      {{"--config", small, "--device", "cpu", "--kernels", "cudnn"}, "rtvd: error: --kernels cudnn: a choice of CUDA kernels"},
      {{"--config", small, "--device", "cpu", "--size", "12"}, "rtvd: error: --size 12: must be a multiple of 8"},
      {{"--config", small, "--device", "cpu", "--weights", small + "/golden.safetensors"},
       "rtvd: error: " + small + "/golden.safetensors: tensor 'down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight' is missing"},
      {{"--config", small, "--batch", "0"}, "rtvd: error: flag '--batch': expected an integer in [1, 64], got 0"},
  };
  for (const auto& [args, error] : cases) {
    const test::RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 1) << error;
    EXPECT_EQ(r.err.rfind(error, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace rtvd
