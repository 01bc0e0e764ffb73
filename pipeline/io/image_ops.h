// Host image operations the frame sources need: crop an 8-bit RGB/RGBA image to the frame's aspect ratio,
// resize it to the frame size and convert it to the model's input range (floats) or keep it in bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rtvd {

// 8-bit interleaved pixels owned elsewhere: RGB (channels 3) or RGBA (channels 4); rows row_bytes apart,
// so an OpenCV Mat or an ImageRgba8 can be viewed without a copy.
struct PixelView {
  const uint8_t* data = nullptr;
  int width = 0, height = 0, channels = 0;
  size_t row_bytes = 0;
};

// The largest region centred in src with the aspect ratio width:height, as a view into src's pixels (no
// copy). Cropping before resize_to_rgb_float keeps shapes: a 4:3 frame loses its sides instead of being
// squeezed into a square, as img2img tools do. The crop's size is rounded to whole pixels; an odd
// leftover pixel goes to the right or bottom margin.
PixelView center_crop(const PixelView& src, int width, int height);

// Resizes src to (width, height) and writes RGB floats in [-1, 1] (v / 127.5 - 1), (height, width, 3)
// row-major, into rgb (resized to fit). Each axis on its own: area averaging where it shrinks (every
// source pixel counts, no aliasing), bilinear where it grows (pixel centres aligned, edges clamped),
// a copy where the size is equal. Alpha is dropped.
void resize_to_rgb_float(const PixelView& src, int width, int height, std::vector<float>& rgb);

// The same resampling to 8-bit RGB: each value rounded to the nearest byte, so that b / 127.5 - 1 is the float
// output to within half a step (exactly it where the size is equal). What the engine sends the device.
void resize_to_rgb8(const PixelView& src, int width, int height, std::vector<uint8_t>& rgb);

}  // namespace rtvd
