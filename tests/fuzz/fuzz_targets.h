// The entry points of the fuzzers (tests/fuzz/*_fuzzer.cpp), shared with tests/fuzz_regression_test.cpp so
// that a saved crash replays through exactly the code that found it. Each one parses hostile bytes, uses the
// result as rtvd would, and checks what the parser's header promises; a broken promise aborts, which the
// fuzzer reports as a crash. A rejected input throws rtvd::Error and is left to the caller: any other
// exception, like a crash, is a defect.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "pipeline/io/png.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/weights.h"
#include "pipeline/models/unet.h"

namespace rtvd::fuzz {

inline void expect(bool holds, const char* promise) {
  if (holds) return;
  std::fprintf(stderr, "fuzz: broken promise: %s\n", promise);
  std::abort();
}

// Reads a range's first and last byte, so that ASan checks that the range lies inside its allocation.
inline void touch(const uint8_t* p, size_t n) {
  if (n == 0) return;
  [[maybe_unused]] volatile uint8_t first = p[0], last = p[n - 1];
}

inline uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline uint32_t read_be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// safetensors.h: every tensor lies inside the data section, and sorted they tile it exactly; get() finds
// each by its own dtype and shape; a file rebuilt from the tensors (SafeTensorsFile::build, the writer's
// header) parses back to the same tensors. weights.h, what load_model does next: a WeightStore takes only
// finite weights, so every value it reads back is finite.
inline void safetensors(std::span<const uint8_t> bytes) {
  // A heap block of exactly the input's size: ASan flags a read one byte past the end.
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  const SafeTensorsFile file = SafeTensorsFile::from_memory(copy.data(), copy.size(), "fuzz input");
  const uint8_t* end = copy.data() + copy.size();
  const uint8_t* next = copy.data() + 8 + read_le64(copy.data());  // the data section
  std::vector<TensorSpec> specs;
  uint64_t total = 0;
  for (const TensorView& t : file.tensors()) {
    expect(t.data == next && t.bytes <= size_t(end - t.data), "tensors tile the data section in file order");
    next = t.data + t.bytes;
    expect(uint64_t(t.numel()) * dtype_size(t.dtype) == t.bytes, "numel x dtype size is the byte count");
    touch(t.data, t.bytes);
    expect(file.find(t.name) == &t && &file.get(t.name, t.dtype, t.shape) == &t, "get finds every tensor");
    specs.push_back({t.name, t.dtype, t.shape});
    total += t.bytes;
  }
  expect(next == end, "the tensors end where the input ends");

  // The round trip and the reads allocate the data again: only for inputs of fuzzing size.
  if (total > (1u << 20)) return;
  const DType weights = !file.tensors().empty() && file.tensors()[0].dtype == DType::F16 ? DType::F16 : DType::F32;
  WeightStore store(file, weights);
  for (const TensorView& t : file.tensors()) {
    if (t.dtype != weights) continue;
    for (float v : store.read(t.name, t.shape)) expect(std::isfinite(v), "a WeightStore reads only finite weights");
  }

  const std::vector<TensorView>& tensors = file.tensors();
  const SafeTensorsFile rebuilt = SafeTensorsFile::build(
      "fuzz rebuild", specs, [&](size_t i, uint8_t* out) { std::memcpy(out, tensors[i].data, tensors[i].bytes); });
  expect(rebuilt.tensors().size() == tensors.size(), "a rebuilt file holds the same tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& a = tensors[i];
    const TensorView* b = rebuilt.find(a.name);
    expect(b && b->dtype == a.dtype && b->shape == a.shape && b->bytes == a.bytes &&
               (a.bytes == 0 || std::memcmp(a.data, b->data, a.bytes) == 0),
           "a rebuilt tensor equals the original");
  }
}

// model_config.h: a parsed config is consistent (one attention level per block level, exactly one of head
// dim and head count, divisible channels, sample_size a multiple of size_multiple()), and the U-Net's
// parameter list for it (what load_model checks the weights against) can be made.
inline void model_config(std::span<const uint8_t> bytes) {
  const ModelConfig c = parse_model_config(std::string(bytes.begin(), bytes.end()), "fuzz input");
  expect(c.levels() >= 1 && c.attention_levels.size() == c.block_out_channels.size(),
         "one attention flag per block level");
  expect((c.attention_head_dim > 0) != (c.num_attention_heads > 0),
         "exactly one of attention_head_dim and num_attention_heads");
  expect(c.sample_size > 0 && c.sample_size % c.size_multiple() == 0, "sample_size is a multiple of size_multiple()");
  expect(c.time_embed_dim() > 0, "a positive time embedding width");
  for (int i = 0; i < c.levels(); ++i) {
    const int channels = c.block_out_channels[i];
    const bool attention = c.attention_levels[i] || (c.mid_attention && i == c.levels() - 1);
    if (!attention) continue;
    const int heads = c.heads_for(channels);
    expect(heads > 0 && channels % heads == 0, "attention heads divide the channels");
  }
  if (c.num_class_embeds > 0) expect(c.null_class() >= 0, "a null class");
  for (const TensorSpec& p : unet_parameters(c))
    for (int64_t d : p.shape) expect(d > 0, "every parameter dimension is positive");
}

// An in-memory file: read_png takes a path, and a memfd gives one without touching the disk.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("rtvd_fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create: ", std::strerror(errno));
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }
  void assign(std::span<const uint8_t> bytes) {
    if (ftruncate(fd_, 0) != 0 || (bytes.size() && pwrite(fd_, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size())))
      fail("memfd write: ", std::strerror(errno));
  }

 private:
  int fd_;
};

// png.h: a decoded image has the size its IHDR gives and 4 bytes a pixel, and write_png's output decodes
// back to the same pixels.
inline void png(std::span<const uint8_t> bytes) {
  static MemFile file;
  file.assign(bytes);
  const ImageRgba8 image = read_png(file.path());
  expect(image.width > 0 && image.height > 0 &&
             image.pixels.size() == size_t(image.width) * size_t(image.height) * 4,
         "a decoded image holds width x height RGBA pixels");
  expect(bytes.size() >= 24 && uint32_t(image.width) == read_be32(&bytes[16]) &&
             uint32_t(image.height) == read_be32(&bytes[20]),
         "the decoded size is the IHDR's");

  // The round trip filters and compresses again, the most costly step here: small images only.
  if (image.pixels.size() > (1u << 14)) return;
  write_png(file.path(), image);
  const ImageRgba8 again = read_png(file.path());
  expect(again.width == image.width && again.height == image.height && again.pixels == image.pixels,
         "write_png's output decodes to the same pixels");
}

}  // namespace rtvd::fuzz
