// A small PNG codec on zlib, so frames and screenshots can be written and images read without OpenCV.
// Reads 8-bit non-interlaced grey, grey+alpha, RGB, RGBA and palette images; writes RGBA8.
#pragma once
#include <string>

#include "pipeline/io/image.h"

namespace rtvd {

void write_png(const std::string& path, const ImageRgba8& image);
ImageRgba8 read_png(const std::string& path);

}  // namespace rtvd
