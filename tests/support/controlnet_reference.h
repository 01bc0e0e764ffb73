// tests/data/tiny_controlnet (tools/reference/export_tiny_controlnet.py): two ControlNets of tests/data/tiny_sd's
// U-Net and diffusers' outputs for them, and rtvd's graph of the same on any backend.
#pragma once
#include <string>
#include <vector>

#include "pipeline/backends/backend.h"

namespace rtvd::test {

// What one case of reference.safetensors holds, NHWC, or what rtvd computes for it.
struct ControlNetOutputs {
  std::vector<std::vector<float>> down1, down2;  // each net's residuals
  std::vector<float> mid1, mid2;
  std::vector<float> output1, output_sum;  // the U-Net's outputs with them
};

struct ControlNetCase {
  std::string name;
  int batch = 0, height = 0, width = 0;  // of the latents
  float t = 0;                           // diffusers' timestep / 1000
  std::vector<float> x, context, cond1, cond2;
  ControlNetOutputs expected;            // diffusers'
};

// tiny_controlnet's folder, or "" after one failure naming the script when it has not been exported.
std::string tiny_controlnet_dir();
// Its cases; scales: the conditioning scales of net 1 and net 2 they were made with.
std::vector<ControlNetCase> read_controlnet_cases(const std::string& dir, float scales[2]);

// rtvd on backend: tiny_sd's U-Net and dir's two nets in one store ("controlnet.0.", "controlnet.1."), net 1's
// residuals at scales[0], net 2's at scales[1], and the U-Net given net 1's or both nets'.
ControlNetOutputs run_controlnets(Backend& backend, const std::string& dir, const ControlNetCase& c,
                                  const float scales[2]);

// Every residual and output of got against want: relative L2 <= tolerance, each its own expectation.
void expect_near(const ControlNetOutputs& got, const ControlNetOutputs& want, double tolerance);

}  // namespace rtvd::test
