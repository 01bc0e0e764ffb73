// The mutator of png_structured_fuzzer. Byte mutations break a chunk's CRC or the zlib stream at nearly every
// step, so few inputs get past the chunk loop; this one splits the file into chunks, changes the header's
// fields, the palette, the transparency, the chunk order and the scanlines (inflated, changed, deflated
// again), and writes every CRC right, so that edge headers meet image data of the size they promise.
// Compiled without libFuzzer's coverage: its own branches are not the target's.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/mutation.h"

namespace rtvd::fuzz {
namespace {

constexpr char kSignature[] = "\x89PNG\r\n\x1a\n";
// Scanlines the mutator makes or inflates at most: images to 256x256 RGBA, and fast.
constexpr uint64_t kMaxRaw = 1 << 18;

struct Chunk {
  std::string type;  // 4 bytes
  std::string data;
  bool bad_crc = false;
};

struct Png {
  std::vector<Chunk> chunks;
  std::string trailing;  // bytes after IEND
};

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += char(v >> shift);
}

// The chunks as they are, CRCs unread: a file with bad CRCs is still a structure to mutate.
std::optional<Png> parse_png(const uint8_t* data, size_t size) {
  if (size < 8 || std::memcmp(data, kSignature, 8) != 0) return std::nullopt;
  Png png;
  size_t at = 8;
  while (size - at >= 12) {
    const uint32_t length = read_be32(data + at);
    if (length > size - at - 12) break;
    Chunk c{std::string(reinterpret_cast<const char*>(data + at + 4), 4),
            std::string(reinterpret_cast<const char*>(data + at + 8), length)};
    at += 12 + length;
    png.chunks.push_back(std::move(c));
    if (png.chunks.back().type == "IEND") break;
  }
  png.trailing.assign(reinterpret_cast<const char*>(data + at), size - at);
  return png;
}

std::string serialise(const Png& png) {
  std::string out(kSignature, 8);
  for (const Chunk& c : png.chunks) {
    put_be32(out, uint32_t(c.data.size()));
    const std::string body = c.type + c.data;
    out += body;
    const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size())));
    put_be32(out, c.bad_crc ? ~crc : crc);
  }
  return out + png.trailing;
}

Chunk* find(Png& png, const char* type) {
  for (Chunk& c : png.chunks)
    if (c.type == type) return &c;
  return nullptr;
}

struct Header {
  uint32_t width = 0, height = 0;
  uint8_t depth = 0, color = 0, compression = 0, filter = 0, interlace = 0;
};

std::optional<Header> read_header(Png& png) {
  const Chunk* ihdr = find(png, "IHDR");
  if (!ihdr || ihdr->data.size() != 13) return std::nullopt;
  const auto* d = reinterpret_cast<const uint8_t*>(ihdr->data.data());
  return Header{read_be32(d), read_be32(d + 4), d[8], d[9], d[10], d[11], d[12]};
}

std::string header_data(const Header& h) {
  std::string s;
  put_be32(s, h.width);
  put_be32(s, h.height);
  return s + char(h.depth) + char(h.color) + char(h.compression) + char(h.filter) + char(h.interlace);
}

int channels(uint8_t color) {
  switch (color) {
    case 0: case 3: return 1;
    case 2: return 3;
    case 4: return 2;
    case 6: return 4;
    default: return 0;
  }
}

// The byte length of each scanline (without its filter byte) the header implies, pass after pass for
// Adam7; nothing when the header is not one the decoder can accept or the image is too large to make.
std::optional<std::vector<uint64_t>> scanlines(const Header& h) {
  const uint64_t bits = uint64_t(channels(h.color)) * h.depth;
  if (bits == 0 || h.width == 0 || h.height == 0) return std::nullopt;
  struct Pass { uint32_t x0, y0, dx, dy; };
  constexpr Pass kWhole[] = {{0, 0, 1, 1}};
  constexpr Pass kAdam7[] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                             {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  std::vector<uint64_t> rows;
  uint64_t total = 0;
  for (const Pass& p : h.interlace == 1 ? std::span<const Pass>(kAdam7) : std::span<const Pass>(kWhole)) {
    const uint64_t w = h.width > p.x0 ? (uint64_t(h.width) - p.x0 + p.dx - 1) / p.dx : 0;
    const uint64_t n = h.height > p.y0 ? (uint64_t(h.height) - p.y0 + p.dy - 1) / p.dy : 0;
    if (w == 0 || n == 0) continue;
    const uint64_t row = (w * bits + 7) / 8;
    total += n * (row + 1);
    if (total > kMaxRaw) return std::nullopt;
    rows.insert(rows.end(), n, row);
  }
  return rows;
}

// As much of the stream as inflates, up to kMaxRaw bytes, into a buffer that grows with the output.
std::string inflate_all(const std::string& compressed) {
  std::string out(std::min<uint64_t>(kMaxRaw, 4 * compressed.size() + 1024), '\0');
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return {};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = uInt(compressed.size());
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(out.data()) + z.total_out;
    z.avail_out = uInt(out.size() - z.total_out);
    const int status = inflate(&z, Z_NO_FLUSH);
    if ((status != Z_OK && status != Z_BUF_ERROR) || z.avail_out != 0 || out.size() == kMaxRaw) break;
    out.resize(std::min<uint64_t>(kMaxRaw, 2 * out.size()));
  }
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

std::string deflate_all(const std::string& raw, int level) {
  uLongf size = compressBound(uLong(raw.size()));
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                uLong(raw.size()), level) != Z_OK)
    return {};
  out.resize(size);
  return out;
}

std::string idat_stream(const Png& png) {
  std::string s;
  for (const Chunk& c : png.chunks)
    if (c.type == "IDAT") s += c.data;
  return s;
}

// The IDAT chunks replaced by one stream cut into 1 to 4 chunks, where the first IDAT was (or before IEND).
void set_idat(Png& png, const std::string& stream, Rng& rng) {
  auto at = std::find_if(png.chunks.begin(), png.chunks.end(), [](const Chunk& c) { return c.type == "IDAT"; });
  if (at == png.chunks.end())
    at = std::find_if(png.chunks.begin(), png.chunks.end(), [](const Chunk& c) { return c.type == "IEND"; });
  size_t index = size_t(at - png.chunks.begin());
  index -= size_t(std::count_if(png.chunks.begin(), at, [](const Chunk& c) { return c.type == "IDAT"; }));
  std::erase_if(png.chunks, [](const Chunk& c) { return c.type == "IDAT"; });
  const size_t parts = 1 + rng.below(rng.chance(80) ? 1 : 4);
  const size_t step = stream.size() / parts + 1;
  std::vector<Chunk> idats;
  for (size_t i = 0; i < stream.size() || idats.empty(); i += step) idats.push_back({"IDAT", stream.substr(i, step)});
  png.chunks.insert(png.chunks.begin() + std::min(index, png.chunks.size()), idats.begin(), idats.end());
}

// Fresh scanlines of exactly the size the header implies: filter bytes mostly valid, samples mostly small
// (palette indices in range more often than not).
std::optional<std::string> fresh_scanlines(const Header& h, Rng& rng) {
  const std::optional<std::vector<uint64_t>> rows = scanlines(h);
  if (!rows) return std::nullopt;
  std::string raw;
  const uint8_t limit = h.color == 3 ? uint8_t(rng.below(256)) : 255;
  for (uint64_t row : *rows) {
    raw += char(rng.chance(95) ? rng.below(5) : rng.byte());
    for (uint64_t i = 0; i < row; ++i) raw += char(rng.chance(90) ? rng.below(uint64_t(limit) + 1) : rng.byte());
  }
  return raw;
}

std::string palette_data(size_t entries, Rng& rng) {
  std::string s(3 * entries, '\0');
  for (char& c : s) c = char(rng.byte());
  return s;
}

Png fresh_png(Rng& rng) {
  constexpr uint8_t kColors[] = {0, 2, 3, 4, 6};
  constexpr uint8_t kDepths[] = {1, 2, 4, 8, 16};
  Header h{uint32_t(1 + rng.below(16)), uint32_t(1 + rng.below(16)), 8, rng.pick(kColors), 0, 0,
           uint8_t(rng.chance(15) ? 1 : 0)};
  h.depth = h.color == 0 ? rng.pick(kDepths) : h.color == 3 ? uint8_t(1 << rng.below(4)) : uint8_t(rng.chance(50) ? 8 : 16);
  Png png;
  png.chunks.push_back({"IHDR", header_data(h)});
  if (h.color == 3) png.chunks.push_back({"PLTE", palette_data(1 + rng.below(256), rng)});
  if (rng.chance(20)) png.chunks.push_back({"tRNS", std::string(h.color == 2 ? 6 : h.color == 0 ? 2 : 1 + rng.below(4), '\x01')});
  png.chunks.push_back({"IEND", ""});
  set_idat(png, deflate_all(fresh_scanlines(h, rng).value_or(""), int(rng.below(10))), rng);
  return png;
}

void mutate_header(Png& png, Header h, Rng& rng) {
  constexpr uint32_t kSizes[] = {0, 1, 2, 3, 7, 8, 9, 255, 256, 16384, 16385, 65535, 65536, 1u << 28, (1u << 31) - 1,
                                 1u << 31, 0xffffffff};
  constexpr uint8_t kDepths[] = {0, 1, 2, 3, 4, 8, 16, 32, 255};
  constexpr uint8_t kColors[] = {0, 1, 2, 3, 4, 5, 6, 7, 255};
  switch (rng.below(6)) {
    case 0: h.width = rng.chance(50) ? rng.pick(kSizes) : uint32_t(1 + rng.below(64)); break;
    case 1: h.height = rng.chance(50) ? rng.pick(kSizes) : uint32_t(1 + rng.below(64)); break;
    case 2: h.depth = rng.pick(kDepths); break;
    case 3: h.color = rng.pick(kColors); break;
    case 4: h.interlace = uint8_t(rng.chance(80) ? !h.interlace : rng.byte()); break;
    default: (rng.chance(50) ? h.compression : h.filter) = uint8_t(1 + rng.below(255)); break;
  }
  find(png, "IHDR")->data = header_data(h);
  if (rng.chance(60))  // new scanlines to match, where the header allows
    if (const std::optional<std::string> raw = fresh_scanlines(h, rng)) set_idat(png, deflate_all(*raw, 6), rng);
}

// The scanlines as bytes: inflated, changed by libFuzzer's byte mutations or made a little longer or
// shorter than the header implies, deflated again.
void mutate_scanlines(Png& png, Rng& rng) {
  std::string raw = inflate_all(idat_stream(png));
  switch (rng.below(4)) {
    case 0: raw.append(1 + rng.below(rng.chance(50) ? 2 : 64), char(rng.byte())); break;
    case 1: raw.resize(raw.size() - std::min<size_t>(raw.size(), 1 + rng.below(rng.chance(50) ? 2 : 64))); break;
    default: mutate_bytes(raw, std::min<size_t>(kMaxRaw, raw.size() + 64)); break;
  }
  set_idat(png, deflate_all(raw, int(rng.below(10))), rng);
}

// The zlib stream itself: bytes changed, cut short, followed by junk, or without its zlib header.
void mutate_stream(Png& png, Rng& rng) {
  std::string s = idat_stream(png);
  switch (rng.below(4)) {
    case 0: mutate_bytes(s, s.size() + 16); break;
    case 1: s.resize(s.size() - std::min<size_t>(s.size(), 1 + rng.below(8))); break;
    case 2: s.append(1 + rng.below(8), char(rng.byte())); break;
    default: s.erase(0, std::min<size_t>(s.size(), 2)); break;
  }
  set_idat(png, s, rng);
}

void mutate_chunks(Png& png, Rng& rng) {
  constexpr const char* kTypes[] = {"tEXt", "zTXt", "iCCP", "gAMA", "sRGB", "pHYs", "bKGD", "sBIT", "acTL",
                                    "ABCD", "IDAT", "PLTE", "tRNS", "IHDR", "IEND", "iDOT", "\0\0\0\0"};
  const size_t n = png.chunks.size();
  switch (rng.below(7)) {
    case 0: if (n > 1) std::swap(png.chunks[rng.below(n)], png.chunks[rng.below(n)]); break;
    case 1: if (n) png.chunks.insert(png.chunks.begin() + rng.below(n + 1), png.chunks[rng.below(n)]); break;
    case 2: if (n) png.chunks.erase(png.chunks.begin() + rng.below(n)); break;
    case 3: {
      std::string data(rng.below(rng.chance(80) ? 16 : 300), '\0');
      for (char& c : data) c = char(rng.byte());
      png.chunks.insert(png.chunks.begin() + rng.below(n + 1), Chunk{std::string(rng.pick(kTypes), 4), data});
      break;
    }
    case 4: if (n) png.chunks[rng.below(n)].bad_crc = true; break;
    case 5: png.trailing.append(1 + rng.below(16), char(rng.byte())); break;
    default: if (n) mutate_bytes(png.chunks[rng.below(n)].data, 512); break;
  }
}

// PLTE and tRNS at the sizes that sit on the limits: 0, 1, 2^depth, 256, 257 entries, not a multiple of 3.
void mutate_palette(Png& png, Rng& rng) {
  constexpr size_t kEntries[] = {0, 1, 2, 3, 4, 15, 16, 17, 255, 256, 257};
  Chunk* plte = find(png, "PLTE");
  Chunk* trns = find(png, "tRNS");
  switch (rng.below(4)) {
    case 0: {
      const std::string data = palette_data(rng.pick(kEntries), rng);
      if (plte) plte->data = data;
      else png.chunks.insert(png.chunks.begin() + std::min<size_t>(1, png.chunks.size()), Chunk{"PLTE", data});
      break;
    }
    case 1: if (plte) plte->data.resize(plte->data.size() + 1 + rng.below(2)); break;
    default: {
      const std::string data(rng.chance(50) ? rng.pick(kEntries) : 2 * rng.below(4), char(rng.byte()));
      if (trns) trns->data = data;
      else png.chunks.insert(png.chunks.begin() + std::min<size_t>(1 + rng.below(2), png.chunks.size()), Chunk{"tRNS", data});
      break;
    }
  }
}

}  // namespace
}  // namespace rtvd::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  std::optional<Png> png = parse_png(data, size);
  if (!png && rng.chance(30)) png = fresh_png(rng);
  if (!png || rng.chance(5)) {  // not a PNG the mutator can parse, or by chance: libFuzzer's byte mutations
    return mutate_input_bytes(data, size, max_size);
  }
  for (uint64_t n = 1 + rng.below(2); n > 0; --n) {
    const std::optional<Header> header = read_header(*png);
    switch (rng.below(8)) {
      case 0:
      case 1: if (header) mutate_header(*png, *header, rng); break;
      case 2: mutate_scanlines(*png, rng); break;
      case 3: mutate_stream(*png, rng); break;
      case 4: mutate_palette(*png, rng); break;
      case 5:
      case 6: mutate_chunks(*png, rng); break;
      default: *png = fresh_png(rng); break;
    }
  }
  std::string out = serialise(*png);
  return emit_or_mutate_bytes(out, data, size, max_size);
}
