// rgb8_to_float: a source image as the host sends it, 8-bit RGB (a quarter of fp32's bytes), to the model's fp32
// image in [-1, 1]: b / 127.5 - 1, the value the frame sources' float path gives a byte (image_ops.h).
#pragma once
#include <cstdint>

namespace rtvd {

struct Rgb8ToFloatParams {
  const uint8_t* x = nullptr;  // (count)
  float* y = nullptr;          // (count)
  int64_t count = 0;
};

void rgb8_to_float_cpu(const Rgb8ToFloatParams& p);

}  // namespace rtvd
