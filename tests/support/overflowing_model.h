// A model and a video whose second frame makes the model's output NaN, for the end-to-end tests of frames
// that are not finite (rtvd render and rtvd gui). Every weight is finite, so the model loads.
//
// The model: tests/data/tiny_group's GroupNorm U-Net with RGB in and out and no attention, random weights,
// but conv_in's first output channel is +W on every red tap and -W on every green one (W = 2.5e37). At
// img2img strength 0.001 a frame's model input is its image (plus 0.001 noise), so that channel is 9 W (R - G)
// at each pixel: about 0 on a grey frame, where GroupNorm scales it back and the frame is finite; on a red one
// (R = 1, G = -1) 18 W, past float's largest value (3.4e38): Inf, and every value after the norm NaN.
#pragma once
#include <filesystem>
#include <string>

namespace rtvd::test {

struct OverflowingModel {
  std::string model;  // a folder: config.json and weights.safetensors
  std::string video;  // an MP4 of 32x32: grey, red, grey, grey
};

// Writes both into dir. The video needs FFmpeg's libraries (RTVD_HAS_LIBAV), reading it OpenCV.
OverflowingModel write_overflowing_model(const std::filesystem::path& dir);

}  // namespace rtvd::test
