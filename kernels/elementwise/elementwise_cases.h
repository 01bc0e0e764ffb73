// The elementwise ops' cases (GEGLU, SiLU, nearest 2x upsampling, channel concat, scale-activation-scale):
// the tables that the correctness tests (tests/ops/elementwise_test.cpp) and the kernel benchmark both run.
// Production shapes of the SD 2.1 U-Net at batch 2 and of TAESD at 512x512, and hostile ones (sizes not a
// multiple of 8, a single element or pixel, pointers only 2-byte aligned, in place). Plain C++.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/elementwise/elementwise.h"

namespace rtvd {

struct GegluCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int rows = 0, f = 0;
  int misalign_bytes = 0;  // x and y start this many bytes past a 16-byte boundary (the caller offsets them)
  bool production = false;
  std::string hostile = "";  // "" for none
};

struct SiluCase {
  std::string name;
  int64_t count = 0;
  int misalign_bytes = 0;  // x and y
  bool in_place = false;   // y = x
  bool production = false;
  std::string hostile = "";
};

struct Upsample2xCase {
  std::string name;
  int n = 0, h = 0, w = 0, c = 0;
  int misalign_bytes = 0;  // x and y
  bool production = false;
  std::string hostile = "";
};

struct ConcatCase {
  std::string name;
  int64_t pixels = 0;
  int ca = 0, cb = 0;
  int misalign_bytes = 0;  // a only
  bool production = false;
  std::string hostile = "";
};

struct ScaleActivationCase {
  std::string name;
  int64_t count = 0;
  float in_scale = 1.0f, in_shift = 0.0f, out_scale = 1.0f;
  Activation act = Activation::None;
  int misalign_bytes = 0;  // x and y (and the residual)
  bool in_place = false;   // y = x
  bool with_residual = false;
  bool production = false;
  std::string hostile = "";
};

const std::vector<GegluCase>& geglu_cases();
const std::vector<SiluCase>& silu_cases();
const std::vector<Upsample2xCase>& upsample2x_cases();
const std::vector<ConcatCase>& concat_cases();
const std::vector<ScaleActivationCase>& scale_activation_cases();

// Each case's params over the caller's buffers (x (rows, 2f) -> y (rows, f); x -> y (count), y = x in
// place; x (n, h, w, c) -> y (n, 2h, 2w, c); a (pixels, ca), b (pixels, cb) -> y (pixels, ca + cb); x -> y
// (count), y = x in place, + residual (count) where the case has one).
GegluParams geglu_params(const GegluCase& c, const void* x, void* y);
SiluParams silu_params(const SiluCase& c, const void* x, void* y);
Upsample2xParams upsample2x_params(const Upsample2xCase& c, const void* x, void* y);
ConcatParams concat_params(const ConcatCase& c, const void* a, const void* b, void* y);
ScaleActivationParams scale_activation_params(const ScaleActivationCase& c, const void* x, void* y,
                                              const void* residual);

}  // namespace rtvd
