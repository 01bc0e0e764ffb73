// PNG on zlib (ISO/IEC 15948). The reader checks each chunk's bounds and CRC before using its bytes and
// inflates into a buffer of exactly the size the header promises, so a corrupt file fails with an Error
// naming it instead of reading past an allocation.
#include "pipeline/io/png.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>

#include "kernels/common/error.h"

namespace rtvd {

namespace {

constexpr std::array<uint8_t, 8> kSignature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
// Frames and screenshots are written inside the render loop: favour speed over the last few percent of size.
constexpr int kWriteCompression = Z_BEST_SPEED;
// Far beyond any frame; keeps a hostile header from asking for gigabytes.
constexpr uint64_t kMaxPixels = uint64_t(1) << 28;

enum ColorType : uint8_t { kGrey = 0, kRgb = 2, kPalette = 3, kGreyAlpha = 4, kRgba = 6 };
enum Filter : uint8_t { kNone = 0, kSub = 1, kUp = 2, kAverage = 3, kPaeth = 4 };
constexpr int kFilterCount = 5;

uint32_t read_be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

void append_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
}

uint8_t paeth_predictor(int a, int b, int c) {  // a = left, b = above, c = upper left
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return uint8_t(a);
  return uint8_t(pb <= pc ? b : c);
}

// The predictor of byte i of a row for one filter type; prev is the row above (zeros for the first row).
uint8_t predict(Filter filter, const uint8_t* row, const uint8_t* prev, size_t i, size_t bpp) {
  const int left = i >= bpp ? row[i - bpp] : 0;
  const int up = prev[i];
  const int up_left = i >= bpp ? prev[i - bpp] : 0;
  switch (filter) {
    case kNone: return 0;
    case kSub: return uint8_t(left);
    case kUp: return uint8_t(up);
    case kAverage: return uint8_t((left + up) / 2);
    case kPaeth: return paeth_predictor(left, up, up_left);
  }
  return 0;
}

// ---- writing ----

void append_chunk(std::vector<uint8_t>& out, const char type[4], const uint8_t* data, size_t size) {
  append_be32(out, uint32_t(size));
  const size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data, data + size);
  append_be32(out, uint32_t(crc32(0, out.data() + type_at, uInt(4 + size))));
}

// One filtered row per image row, each with the filter that minimises the sum of |residual| as signed
// bytes: the usual heuristic (libpng's), cheap and much smaller than filter 0 on rendered images.
std::vector<uint8_t> filter_rows(const ImageRgba8& image) {
  const size_t bpp = 4, row_bytes = size_t(image.width) * bpp;
  const std::vector<uint8_t> zero_row(row_bytes, 0);
  std::vector<uint8_t> out;
  out.reserve(size_t(image.height) * (1 + row_bytes));
  std::array<std::vector<uint8_t>, kFilterCount> candidates;
  for (auto& c : candidates) c.resize(row_bytes);
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* row = image.pixels.data() + size_t(y) * row_bytes;
    const uint8_t* prev = y > 0 ? row - row_bytes : zero_row.data();
    int best = 0;
    uint64_t best_cost = std::numeric_limits<uint64_t>::max();
    for (int f = 0; f < kFilterCount; ++f) {
      uint64_t cost = 0;
      for (size_t i = 0; i < row_bytes; ++i) {
        const uint8_t residual = uint8_t(row[i] - predict(Filter(f), row, prev, i, bpp));
        candidates[f][i] = residual;
        cost += uint64_t(std::abs(int(int8_t(residual))));
      }
      if (cost < best_cost) best = f, best_cost = cost;
    }
    out.push_back(uint8_t(best));
    out.insert(out.end(), candidates[best].begin(), candidates[best].end());
  }
  return out;
}

std::vector<uint8_t> deflate(const std::string& path, const std::vector<uint8_t>& raw) {
  uLongf size = compressBound(uLong(raw.size()));
  std::vector<uint8_t> out(size);
  if (compress2(out.data(), &size, raw.data(), uLong(raw.size()), kWriteCompression) != Z_OK)
    fail(path, ": zlib compression failed");
  out.resize(size);
  return out;
}

// ---- reading ----

struct Header {
  uint32_t width = 0, height = 0;
  uint8_t color_type = 0;
  int channels = 0;
};

struct Chunks {
  Header header;
  std::vector<std::array<uint8_t, 4>> palette;  // RGBA; alpha from tRNS, else 255
  bool has_key = false;                         // tRNS on grey/RGB: one colour that is transparent
  std::array<uint16_t, 3> key{};
  std::vector<uint8_t> compressed;  // all IDAT data, in order
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open: ", std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, ": read error: ", std::strerror(errno));
  return bytes;
}

Header parse_header(const std::string& path, const uint8_t* d, uint32_t size) {
  if (size != 13) fail(path, ": IHDR is ", size, " bytes, expected 13");
  Header h;
  h.width = read_be32(d);
  h.height = read_be32(d + 4);
  const uint8_t depth = d[8], color = d[9], compression = d[10], filter = d[11], interlace = d[12];
  if (h.width == 0 || h.height == 0 || uint64_t(h.width) * h.height > kMaxPixels)
    fail(path, ": image size ", h.width, "x", h.height, " is empty or larger than ", kMaxPixels, " pixels");
  switch (color) {
    case kGrey: h.channels = 1; break;
    case kRgb: h.channels = 3; break;
    case kPalette: h.channels = 1; break;
    case kGreyAlpha: h.channels = 2; break;
    case kRgba: h.channels = 4; break;
    default: fail(path, ": unknown PNG color type ", int(color));
  }
  h.color_type = color;
  if (depth != 8) fail(path, ": bit depth ", int(depth), " is not supported, expected 8-bit PNG");
  if (compression != 0 || filter != 0)
    fail(path, ": unknown compression or filter method (", int(compression), ", ", int(filter), ")");
  if (interlace != 0) fail(path, ": interlaced PNG is not supported, expected a non-interlaced image");
  return h;
}

void parse_palette(const std::string& path, Chunks& c, const uint8_t* d, uint32_t size) {
  if (c.header.color_type != kPalette) return;  // a suggested palette for true-colour images: not needed
  if (size == 0 || size % 3 != 0 || size / 3 > 256)
    fail(path, ": PLTE is ", size, " bytes, expected 3 per entry and 1 to 256 entries");
  c.palette.resize(size / 3);
  for (size_t i = 0; i < c.palette.size(); ++i) c.palette[i] = {d[3 * i], d[3 * i + 1], d[3 * i + 2], 255};
}

void parse_transparency(const std::string& path, Chunks& c, const uint8_t* d, uint32_t size) {
  switch (c.header.color_type) {
    case kPalette:
      if (c.palette.empty()) fail(path, ": tRNS before PLTE");
      if (size > c.palette.size()) fail(path, ": tRNS has ", size, " entries for ", c.palette.size(), " colours");
      for (uint32_t i = 0; i < size; ++i) c.palette[i][3] = d[i];
      return;
    case kGrey:
    case kRgb: {
      const uint32_t samples = c.header.color_type == kGrey ? 1 : 3;
      if (size != 2 * samples) fail(path, ": tRNS is ", size, " bytes, expected ", 2 * samples);
      c.has_key = true;
      for (uint32_t i = 0; i < samples; ++i) c.key[i] = uint16_t(d[2 * i] << 8 | d[2 * i + 1]);
      return;
    }
    default: fail(path, ": tRNS on an image that has an alpha channel");
  }
}

Chunks parse_chunks(const std::string& path, const std::vector<uint8_t>& file) {
  if (file.size() < kSignature.size() || !std::equal(kSignature.begin(), kSignature.end(), file.begin()))
    fail(path, ": not a PNG file (bad signature)");
  Chunks c;
  bool seen_header = false;
  size_t at = kSignature.size();
  for (;;) {
    if (file.size() - at < 12) fail(path, ": truncated PNG (ends before IEND)");
    const uint32_t size = read_be32(&file[at]);
    const uint8_t* type = &file[at + 4];
    const std::string name(reinterpret_cast<const char*>(type), 4);
    if (size > file.size() - at - 12) fail(path, ": truncated PNG (chunk '", name, "' runs past the end)");
    const uint8_t* data = type + 4;
    if (crc32(crc32(0, type, 4), data, size) != read_be32(data + size))
      fail(path, ": CRC mismatch in chunk '", name, "' (corrupt file)");
    at += 12 + size;

    if (!seen_header && name != "IHDR") fail(path, ": first chunk is '", name, "', expected IHDR");
    if (name == "IHDR") {
      if (seen_header) fail(path, ": more than one IHDR");
      c.header = parse_header(path, data, size);
      seen_header = true;
    } else if (name == "PLTE") {
      parse_palette(path, c, data, size);
    } else if (name == "tRNS") {
      parse_transparency(path, c, data, size);
    } else if (name == "IDAT") {
      c.compressed.insert(c.compressed.end(), data, data + size);
    } else if (name == "IEND") {
      break;
    } else if (!(type[0] & 0x20)) {  // bit 5 of the first letter clear: critical, must be understood
      fail(path, ": unknown critical chunk '", name, "'");
    }
  }
  if (c.header.color_type == kPalette && c.palette.empty()) fail(path, ": palette image without PLTE");
  if (c.compressed.empty()) fail(path, ": no IDAT chunk (no image data)");
  return c;
}

// Inflates into exactly `size` bytes: one byte of slack detects a stream longer than the image.
std::vector<uint8_t> inflate_exact(const std::string& path, const std::vector<uint8_t>& compressed, size_t size) {
  std::vector<uint8_t> out(size + 1);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) fail(path, ": zlib inflateInit failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  z.next_in = const_cast<Bytef*>(compressed.data());
  z.avail_in = uInt(compressed.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  const int status = inflate(&z, Z_FINISH);
  if (status == Z_DATA_ERROR || status == Z_NEED_DICT)
    fail(path, ": corrupt image data (zlib: ", z.msg ? z.msg : "invalid stream", ")");
  if (z.total_out > size) fail(path, ": image data is longer than the ", size, " bytes the header gives");
  if (status != Z_STREAM_END) fail(path, ": image data ends early (truncated or corrupt IDAT)");
  if (z.total_out != size) fail(path, ": image data is ", z.total_out, " bytes, expected ", size);
  out.resize(size);
  return out;
}

// Undoes the per-row filters; returns the unfiltered rows packed without their filter bytes.
std::vector<uint8_t> unfilter(const std::string& path, const Header& h, const std::vector<uint8_t>& data) {
  const size_t bpp = size_t(h.channels), row_bytes = size_t(h.width) * bpp;
  std::vector<uint8_t> out(size_t(h.height) * row_bytes);
  const std::vector<uint8_t> zero_row(row_bytes, 0);
  for (uint32_t y = 0; y < h.height; ++y) {
    const uint8_t filter = data[size_t(y) * (row_bytes + 1)];
    if (filter >= kFilterCount) fail(path, ": unknown filter type ", int(filter), " in row ", y);
    const uint8_t* in = &data[size_t(y) * (row_bytes + 1) + 1];
    uint8_t* row = &out[size_t(y) * row_bytes];
    const uint8_t* prev = y > 0 ? row - row_bytes : zero_row.data();
    for (size_t i = 0; i < row_bytes; ++i) row[i] = uint8_t(in[i] + predict(Filter(filter), row, prev, i, bpp));
  }
  return out;
}

ImageRgba8 to_rgba(const std::string& path, const Chunks& c, const std::vector<uint8_t>& samples) {
  const Header& h = c.header;
  ImageRgba8 image;
  image.width = int(h.width);
  image.height = int(h.height);
  const size_t n = size_t(h.width) * h.height;
  image.pixels.resize(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = &samples[i * size_t(h.channels)];
    uint8_t* p = &image.pixels[i * 4];
    switch (h.color_type) {
      case kGrey: p[0] = p[1] = p[2] = s[0], p[3] = c.has_key && s[0] == c.key[0] ? 0 : 255; break;
      case kGreyAlpha: p[0] = p[1] = p[2] = s[0], p[3] = s[1]; break;
      case kRgb:
        p[0] = s[0], p[1] = s[1], p[2] = s[2];
        p[3] = c.has_key && s[0] == c.key[0] && s[1] == c.key[1] && s[2] == c.key[2] ? 0 : 255;
        break;
      case kRgba: std::memcpy(p, s, 4); break;
      case kPalette:
        if (s[0] >= c.palette.size())
          fail(path, ": palette index ", int(s[0]), " is past the ", c.palette.size(), "-entry palette");
        std::memcpy(p, c.palette[s[0]].data(), 4);
        break;
    }
  }
  return image;
}

}  // namespace

void write_png(const std::string& path, const ImageRgba8& image) {
  const size_t expected = size_t(std::max(image.width, 0)) * size_t(std::max(image.height, 0)) * 4;
  if (image.width <= 0 || image.height <= 0 || image.pixels.size() != expected)
    fail(path, ": cannot write a ", image.width, "x", image.height, " RGBA image from ", image.pixels.size(),
         " bytes, expected ", expected);

  std::vector<uint8_t> header;
  append_be32(header, uint32_t(image.width));
  append_be32(header, uint32_t(image.height));
  header.insert(header.end(), {8, kRgba, 0, 0, 0});  // depth, colour type, compression, filter, interlace
  const std::vector<uint8_t> compressed = deflate(path, filter_rows(image));

  std::vector<uint8_t> file(kSignature.begin(), kSignature.end());
  append_chunk(file, "IHDR", header.data(), header.size());
  append_chunk(file, "IDAT", compressed.data(), compressed.size());
  append_chunk(file, "IEND", nullptr, 0);

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(path, ": cannot write: ", std::strerror(errno));
  const bool written = std::fwrite(file.data(), 1, file.size(), f) == file.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    const int err = written ? errno : write_errno;
    std::remove(path.c_str());  // a partial PNG is worse than none
    fail(path, ": write failed: ", std::strerror(err));
  }
}

ImageRgba8 read_png(const std::string& path) {
  const Chunks chunks = parse_chunks(path, read_file(path));
  const Header& h = chunks.header;
  const size_t raw_size = size_t(h.height) * (1 + size_t(h.width) * size_t(h.channels));
  const std::vector<uint8_t> raw = inflate_exact(path, chunks.compressed, raw_size);
  return to_rgba(path, chunks, unfilter(path, h, raw));
}

}  // namespace rtvd
