// safetensors reader (mmap) and writer. The reader trusts nothing: header length against the file, the
// JSON (nesting bounded: json_text.h), known dtypes, shape x dtype size == byte range, every range inside
// the data section, ranges sorted, contiguous and non-overlapping, no duplicate names, overflow-checked
// arithmetic; all of it before a byte of the data section is read. Each failure is an Error naming the file
// (and tensor) and what was expected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rtvd {

enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // the safetensors spelling: "F32", "F16", ...

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data;  // inside the mapping; valid while the file object lives
  size_t bytes;
  int64_t numel() const;  // cannot overflow: the reader refuses shapes whose size does not fit in int64_t
};

// "(320, 4, 3, 3)"; a shape of more than 8 dimensions as its first 8 and "...) (N dims)".
std::string shape_string(std::span<const int64_t> shape);

// A tensor's name, dtype and shape, without its data.
struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

class SafeTensorsFile {
 public:
  // The header read and checked first, then the file mapped read-only with its pages read ahead: at once,
  // or from kBackgroundReadInBytes on, on a thread of its own (background_read_in.h) while the caller goes on.
  static SafeTensorsFile open(const std::string& path);
  static constexpr uint64_t kBackgroundReadInBytes = uint64_t(64) << 20;
  // Parses bytes that outlive the object (e.g. the embedded default model); label names it in errors.
  static SafeTensorsFile from_memory(const void* data, size_t size, std::string label);
  // A file made in memory: the header for `specs` (in order, contiguous), then fill(i, data) writes the
  // bytes of tensor i. fill is called once per tensor, for several tensors at once on OpenMP threads, and
  // must not throw.
  static SafeTensorsFile build(std::string label, const std::vector<TensorSpec>& specs,
                               const std::function<void(size_t, uint8_t*)>& fill);

  const std::string& label() const { return label_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }  // in file order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorView* find(std::string_view name) const;
  // The tensor by name with exactly this dtype and shape, else an Error naming the tensor, the expected
  // and the actual dtype/shape (or that it is missing).
  const TensorView& get(std::string_view name, DType dtype, std::span<const int64_t> shape) const;

 private:
  struct Mapping;
  std::shared_ptr<Mapping> mapping_;  // owns the mmap when opened from a file or built
  std::string label_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;

  struct Index;  // a checked header (safetensors.cpp)
  static Index read_index(const std::string& label, std::string_view header, uint64_t data_bytes);
  void parse(const uint8_t* data, size_t size);  // a whole file in memory
  void attach(Index index, const uint8_t* data_section);
};

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
// Writes a valid file (tensors in the given order, contiguous); used by tests and tools.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace rtvd
