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

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/io/output_files.h"

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
  uint8_t color_type = 0, depth = 0;
  bool interlaced = false;
  int channels = 0;
  size_t bits_per_pixel() const { return size_t(channels) * depth; }
  size_t row_bytes(uint32_t pixels) const { return (size_t(pixels) * bits_per_pixel() + 7) / 8; }
  // The filters' "bpp": the byte distance to the same sample of the pixel on the left (1 below 8 bits).
  size_t filter_stride() const { return std::max<size_t>(1, bits_per_pixel() / 8); }
  uint16_t max_sample() const { return uint16_t((1u << depth) - 1); }
};

// A sub-image of an interlaced PNG: the pixels (x0 + i * dx, y0 + j * dy). A plain PNG is one pass.
struct Pass {
  uint32_t x0, y0, dx, dy;
  uint32_t width(const Header& h) const { return h.width > x0 ? (h.width - x0 + dx - 1) / dx : 0; }
  uint32_t height(const Header& h) const { return h.height > y0 ? (h.height - y0 + dy - 1) / dy : 0; }
};
constexpr std::array<Pass, 1> kWhole = {{{0, 0, 1, 1}}};
constexpr std::array<Pass, 7> kAdam7 = {{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                          {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}}};

std::vector<Pass> passes(const Header& h) {
  std::vector<Pass> out;
  if (h.interlaced) out.assign(kAdam7.begin(), kAdam7.end());
  else out.assign(kWhole.begin(), kWhole.end());
  // Passes without pixels (a small interlaced image) have no rows, not even filter bytes.
  std::erase_if(out, [&](const Pass& p) { return p.width(h) == 0 || p.height(h) == 0; });
  return out;
}

struct Chunks {
  Header header;
  std::vector<std::array<uint8_t, 4>> palette;  // RGBA; alpha from tRNS, else 255
  bool has_key = false;                         // tRNS on grey/RGB: one colour that is transparent
  std::array<uint16_t, 3> key{};                // at the image's bit depth
  std::vector<uint8_t> compressed;  // all IDAT data, in order
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open: ", std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, ": read error: ", std::strerror(errno));
  return bytes;
}

// The bit depths the PNG standard allows for each colour type (its table 11.1).
bool depth_allowed(uint8_t color, uint8_t depth) {
  switch (color) {
    case kGrey: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case kPalette: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    default: return depth == 8 || depth == 16;
  }
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
  if (!depth_allowed(color, depth))
    fail(path, ": bit depth ", int(depth), " is not valid for PNG color type ", int(color),
         " (expected 8 or 16; grey also 1, 2 or 4; palette 1, 2, 4 or 8)");
  h.color_type = color;
  h.depth = depth;
  if (compression != 0 || filter != 0)
    fail(path, ": unknown compression or filter method (", int(compression), ", ", int(filter), ")");
  if (interlace > 1) fail(path, ": unknown interlace method ", int(interlace), ", expected 0 (none) or 1 (Adam7)");
  h.interlaced = interlace == 1;
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
      // Below 16 bits only the low bits count (as libpng reads it).
      for (uint32_t i = 0; i < samples; ++i)
        c.key[i] = uint16_t((d[2 * i] << 8 | d[2 * i + 1]) & c.header.max_sample());
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
    if (size > file.size() - at - 12) fail(path, ": truncated PNG (chunk ", quote(name), " runs past the end)");
    const uint8_t* data = type + 4;
    if (crc32(crc32(0, type, 4), data, size) != read_be32(data + size))
      fail(path, ": CRC mismatch in chunk ", quote(name), " (corrupt file)");
    at += 12 + size;

    if (!seen_header && name != "IHDR") fail(path, ": first chunk is ", quote(name), ", expected IHDR");
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
      fail(path, ": unknown critical chunk ", quote(name));
    }
  }
  if (c.header.color_type == kPalette && c.palette.empty()) fail(path, ": palette image without PLTE");
  if (c.compressed.empty()) fail(path, ": no IDAT chunk (no image data)");
  return c;
}

// Inflates into exactly `size` bytes; one byte of slack detects a stream longer than the image. The buffer
// grows with the output (from 1 MiB, doubling) instead of being allocated at the size the header claims, so
// a few bytes of file whose header promises 2^28 pixels fail at their data's real length, not after
// zeroing gigabytes.
std::vector<uint8_t> inflate_exact(const std::string& path, const std::vector<uint8_t>& compressed, size_t size) {
  const size_t limit = size + 1;
  std::vector<uint8_t> out(std::min(limit, size_t(1) << 20));
  z_stream z{};
  if (inflateInit(&z) != Z_OK) fail(path, ": zlib inflateInit failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  z.next_in = const_cast<Bytef*>(compressed.data());
  z.avail_in = uInt(compressed.size());
  int status = Z_OK;
  for (;;) {
    z.next_out = out.data() + z.total_out;
    z.avail_out = uInt(out.size() - z.total_out);
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_BUF_ERROR) break;  // the end, or an error
    if (z.avail_out != 0 || out.size() == limit) break;  // the input is used up, or the bound is reached
    out.resize(std::min(limit, out.size() * 2));
  }
  if (status == Z_DATA_ERROR || status == Z_NEED_DICT)
    fail(path, ": corrupt image data (zlib: ", z.msg ? z.msg : "invalid stream", ")");
  if (status == Z_MEM_ERROR) fail(path, ": out of memory while inflating the image data");
  if (z.total_out > size) fail(path, ": image data is longer than the ", size, " bytes the header gives");
  if (status != Z_STREAM_END) fail(path, ": image data ends early (truncated or corrupt IDAT)");
  if (z.total_out != size) fail(path, ": image data is ", z.total_out, " bytes, expected ", size);
  out.resize(size);
  return out;
}

// The inflated size: each pass's rows, each with its filter byte.
size_t raw_size(const Header& h) {
  size_t size = 0;
  for (const Pass& p : passes(h)) size += size_t(p.height(h)) * (1 + h.row_bytes(p.width(h)));
  return size;
}

// Undoes the per-row filters of one pass whose filtered rows start at data; returns its rows packed
// without their filter bytes. first_row numbers the rows in errors.
std::vector<uint8_t> unfilter(const std::string& path, const Header& h, const uint8_t* data, uint32_t width,
                              uint32_t height, size_t first_row) {
  const size_t bpp = h.filter_stride(), row_bytes = h.row_bytes(width);
  std::vector<uint8_t> out(size_t(height) * row_bytes);
  const std::vector<uint8_t> zero_row(row_bytes, 0);
  for (uint32_t y = 0; y < height; ++y) {
    const uint8_t filter = data[size_t(y) * (row_bytes + 1)];
    if (filter >= kFilterCount) fail(path, ": unknown filter type ", int(filter), " in row ", first_row + y);
    const uint8_t* in = &data[size_t(y) * (row_bytes + 1) + 1];
    uint8_t* row = &out[size_t(y) * row_bytes];
    const uint8_t* prev = y > 0 ? row - row_bytes : zero_row.data();
    for (size_t i = 0; i < row_bytes; ++i) row[i] = uint8_t(in[i] + predict(Filter(filter), row, prev, i, bpp));
  }
  return out;
}

// Sample `index` (pixel * channels + channel) of an unfiltered row, at the image's bit depth: 16-bit
// samples are big-endian, and samples below 8 bits are packed from the most significant bit.
uint16_t sample(const Header& h, const uint8_t* row, size_t index) {
  if (h.depth == 16) return uint16_t(row[2 * index] << 8 | row[2 * index + 1]);
  if (h.depth == 8) return row[index];
  const size_t bit = index * h.depth;
  return uint16_t((row[bit / 8] >> (8 - h.depth - bit % 8)) & h.max_sample());
}

// A sample scaled to 8 bits, rounded to nearest: v * 255 / max. For 16 bits this is libpng's
// png_set_scale_16 ((v * 255 + 32895) >> 16, equal to round(v / 257)); for 1, 2 and 4 bits it is exact
// (v * 255, 85, 17), as libpng's expansion of low-depth grey.
uint8_t to_8bit(uint16_t v, const Header& h) {
  if (h.depth == 16) return uint8_t((uint32_t(v) * 255 + 32895) >> 16);
  return uint8_t(uint32_t(v) * 255 / h.max_sample());
}

// One pixel of an unfiltered row as RGBA8.
void to_rgba(const std::string& path, const Chunks& c, const uint8_t* row, uint32_t x, uint8_t* p) {
  const Header& h = c.header;
  const size_t at = size_t(x) * size_t(h.channels);
  std::array<uint16_t, 4> s{};
  for (int i = 0; i < h.channels; ++i) s[i] = sample(h, row, at + i);
  switch (h.color_type) {
    case kGrey:
      p[0] = p[1] = p[2] = to_8bit(s[0], h);
      p[3] = c.has_key && s[0] == c.key[0] ? 0 : 255;
      break;
    case kGreyAlpha: p[0] = p[1] = p[2] = to_8bit(s[0], h), p[3] = to_8bit(s[1], h); break;
    case kRgb:
      for (int i = 0; i < 3; ++i) p[i] = to_8bit(s[i], h);
      p[3] = c.has_key && s[0] == c.key[0] && s[1] == c.key[1] && s[2] == c.key[2] ? 0 : 255;
      break;
    case kRgba:
      for (int i = 0; i < 4; ++i) p[i] = to_8bit(s[i], h);
      break;
    case kPalette:
      if (s[0] >= c.palette.size())
        fail(path, ": palette index ", int(s[0]), " is past the ", c.palette.size(), "-entry palette");
      std::memcpy(p, c.palette[s[0]].data(), 4);
      break;
  }
}

// Unfilters each pass and places its pixels, converted to RGBA8, where they belong in the image.
ImageRgba8 decode(const std::string& path, const Chunks& c, const std::vector<uint8_t>& raw) {
  const Header& h = c.header;
  ImageRgba8 image;
  image.width = int(h.width);
  image.height = int(h.height);
  image.pixels.resize(size_t(h.width) * h.height * 4);
  size_t at = 0, first_row = 0;
  for (const Pass& p : passes(h)) {
    const uint32_t width = p.width(h), height = p.height(h);
    const size_t row_bytes = h.row_bytes(width);
    const std::vector<uint8_t> rows = unfilter(path, h, &raw[at], width, height, first_row);
    for (uint32_t y = 0; y < height; ++y)
      for (uint32_t x = 0; x < width; ++x) {
        const size_t pixel = size_t(p.y0 + y * p.dy) * h.width + p.x0 + x * p.dx;
        to_rgba(path, c, &rows[y * row_bytes], x, &image.pixels[pixel * 4]);
      }
    at += size_t(height) * (1 + row_bytes);
    first_row += height;
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
    fail(path, ": write failed: ", write_error_cause(err));
  }
}

ImageRgba8 read_png(const std::string& path) {
  const Chunks chunks = parse_chunks(path, read_file(path));
  return decode(path, chunks, inflate_exact(path, chunks.compressed, raw_size(chunks.header)));
}

}  // namespace rtvd
