// A small PNG codec on zlib, so frames and screenshots can be written and images read without OpenCV.
// Reads every PNG the standard defines: grey, grey+alpha, RGB, RGBA and palette at each bit depth it
// allows (1 to 16), interlaced or not, as RGBA8 (16-bit samples rounded to nearest); writes RGBA8.
#pragma once
#include <string>

#include "pipeline/io/image.h"

namespace rtvd {

void write_png(const std::string& path, const ImageRgba8& image);
ImageRgba8 read_png(const std::string& path);

}  // namespace rtvd
