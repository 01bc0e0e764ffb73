// safetensors: 8-byte little-endian header length N, N bytes of JSON header, then the data section.
// The reader checks every rule of the format before handing out a single pointer into the bytes.
#include "pipeline/model_files/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/background_read_in.h"
#include "pipeline/model_files/json_text.h"

namespace rtvd {

namespace {

using nlohmann::json;

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr std::array<DTypeInfo, 10> kDTypes = {{{DType::F64, "F64", 8},
                                                {DType::F32, "F32", 4},
                                                {DType::F16, "F16", 2},
                                                {DType::BF16, "BF16", 2},
                                                {DType::I64, "I64", 8},
                                                {DType::I32, "I32", 4},
                                                {DType::I16, "I16", 2},
                                                {DType::I8, "I8", 1},
                                                {DType::U8, "U8", 1},
                                                {DType::BOOL, "BOOL", 1}}};

const DTypeInfo& dtype_info(DType t) {
  for (const auto& info : kDTypes)
    if (info.dtype == t) return info;
  fail("unknown DType value ", int(t));
}

// A header this large is not a tensor index but a corrupt or hostile length field.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kLengthFieldBytes = 8;
constexpr uint64_t kMaxDim = uint64_t(std::numeric_limits<int64_t>::max());
constexpr const char* kMetadataKey = "__metadata__";

// A JSON value for an error message: one line and short, whatever the header holds.
std::string brief(const json& v) { return json_excerpt(v); }

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

json parse_header(const std::string& label, std::string_view text) {
  DuplicateKeyFinder duplicates;
  const json header = parse_json(text, cat(label, ": header"), &duplicates);
  if (!header.is_object()) fail(label, ": header must be a JSON object, got ", header.type_name());
  if (duplicates.found) {
    if (duplicates.duplicate_in.empty())
      fail(label, ": duplicate tensor name ", quote(duplicates.duplicate), " in the header");
    fail(label, ": tensor ", quote(duplicates.duplicate_in), ": duplicate key ", quote(duplicates.duplicate));
  }
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::string& label, const json& value) {
  if (!value.is_object())
    fail(label, ": ", kMetadataKey, " must be an object of strings, got ", brief(value));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string())
      fail(label, ": ", kMetadataKey, " entry ", quote(key), " must be a string, got ", brief(v));
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

// One header entry, checked on its own; how the entries tile the data section is checked afterwards.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // within the data section
};

DType parse_dtype(const std::string& where, const json& value) {
  if (!value.is_string()) fail(where, ": dtype must be a string, got ", brief(value));
  const std::string& s = value.get_ref<const std::string&>();
  for (const auto& info : kDTypes)
    if (s == info.name) return info.dtype;
  fail(where, ": unknown dtype ", quote(s), ", expected one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL");
}

// Non-negative JSON integers parse as number_unsigned; negatives and fractions are something else.
bool is_non_negative_integer(const json& v) { return v.is_number_unsigned(); }

std::vector<int64_t> parse_shape(const std::string& where, const json& value) {
  const auto bad = [&] {
    fail(where, ": shape must be an array of non-negative integers below 2^63, got ", brief(value));
  };
  if (!value.is_array()) bad();
  std::vector<int64_t> shape;
  for (const json& d : value) {
    if (!is_non_negative_integer(d) || d.get<uint64_t>() > kMaxDim) bad();
    shape.push_back(int64_t(d.get<uint64_t>()));
  }
  return shape;
}

std::pair<uint64_t, uint64_t> parse_offsets(const std::string& where, const json& value) {
  if (!value.is_array() || value.size() != 2 || !is_non_negative_integer(value[0]) ||
      !is_non_negative_integer(value[1]))
    fail(where, ": data_offsets must be [begin, end] of two non-negative integers, got ", brief(value));
  const uint64_t begin = value[0].get<uint64_t>(), end = value[1].get<uint64_t>();
  if (begin > end) fail(where, ": data_offsets begin ", begin, " is after end ", end);
  return {begin, end};
}

// Bytes that shape x dtype occupy; Error naming the tensor when any partial product leaves int64_t, so that
// the element count (TensorView::numel) and the byte count fit whatever order they are computed in.
uint64_t checked_bytes(const std::string& where, const std::vector<int64_t>& shape, DType dtype) {
  return uint64_t(checked_numel(shape, cat(where, ": shape ", shape_string(shape), " x ", dtype_name(dtype)),
                                int64_t(dtype_size(dtype))));
}

Entry parse_entry(const std::string& label, const std::string& name, const json& value,
                  uint64_t data_bytes) {
  const std::string where = cat(label, ": tensor ", quote(name));
  if (!value.is_object()) fail(where, ": entry must be an object, got ", brief(value));
  for (const auto& [key, v] : value.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(where, ": unknown key ", quote(key), ", expected only dtype, shape and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key)) fail(where, ": missing key '", key, "'");

  Entry e{name, parse_dtype(where, value["dtype"]), parse_shape(where, value["shape"]), 0, 0};
  std::tie(e.begin, e.end) = parse_offsets(where, value["data_offsets"]);
  const uint64_t bytes = checked_bytes(where, e.shape, e.dtype);
  if (bytes != e.end - e.begin)
    fail(where, ": shape ", shape_string(e.shape), " of ", dtype_name(e.dtype), " needs ", bytes,
         " bytes, but data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin);
  if (e.end > data_bytes)
    fail(where, ": data_offsets [", e.begin, ", ", e.end, "] reach past the data section of ",
         data_bytes, " bytes");
  return e;
}

// Sorted by offset, the entries must tile the data section exactly: no gap, no overlap, no tail.
void check_tiling(const std::string& label, const std::vector<Entry>& sorted, uint64_t data_bytes) {
  uint64_t expected_begin = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : sorted) {
    if (e.begin < expected_begin)
      fail(label, ": tensor ", quote(e.name), " begins at byte ", e.begin, ", overlapping ",
           quote(previous->name), " which ends at byte ", expected_begin);
    if (e.begin > expected_begin)
      fail(label, ": tensor ", quote(e.name), " begins at byte ", e.begin, ", leaving a gap: expected byte ",
           expected_begin, previous ? cat(" where ", quote(previous->name), " ends") : " (the first tensor)");
    expected_begin = e.end;
    previous = &e;
  }
  if (expected_begin != data_bytes)
    fail(label, ": data section has ", data_bytes, " bytes but the tensors end at byte ", expected_begin,
         " (trailing bytes)");
}

// The header of a file that holds `specs` contiguously in their order, padded with spaces to a multiple
// of 8 (the format suggests aligning the data section); sizes gets each tensor's byte count.
std::string header_text(const std::string& label, const std::vector<TensorSpec>& specs,
                        const std::map<std::string, std::string>& metadata, std::vector<uint64_t>& sizes) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  sizes.clear();
  for (const TensorSpec& t : specs) {
    const std::string where = cat(label, ": tensor ", quote(t.name));
    if (t.name == kMetadataKey || header.contains(t.name)) fail(where, ": name is reserved or repeated");
    for (int64_t d : t.shape)
      if (d < 0) fail(where, ": shape ", shape_string(t.shape), " has a negative dimension");
    const uint64_t bytes = checked_bytes(where, t.shape, t.dtype);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset = uint64_t(checked_add(int64_t(offset), int64_t(bytes), cat(label, ": data section")));
    sizes.push_back(bytes);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::array<uint8_t, kLengthFieldBytes> length_field(uint64_t header_bytes) {
  std::array<uint8_t, kLengthFieldBytes> length{};
  for (size_t i = 0; i < length.size(); ++i) length[i] = uint8_t(header_bytes >> (8 * i));
  return length;
}

}  // namespace

size_t dtype_size(DType t) { return dtype_info(t).size; }
const char* dtype_name(DType t) { return dtype_info(t).name; }

// Exact and overflow-free: the parser checked that every partial product of shape x dtype size fits.
int64_t TensorView::numel() const { return int64_t(bytes / dtype_size(dtype)); }

std::string shape_string(std::span<const int64_t> shape) {
  constexpr size_t kMaxShown = 8;  // a file's shape may have 100,000 dimensions: a message names a few
  std::string s = "(";
  for (size_t i = 0; i < shape.size() && i < kMaxShown; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return shape.size() <= kMaxShown ? s + ")" : cat(s, ", ...) (", shape.size(), " dims)");
}

struct SafeTensorsFile::Mapping {
  void* address;
  size_t size;
  std::unique_ptr<BackgroundReadIn> read_in;  // a large file's pages, brought in while the caller goes on
  Mapping(void* a, size_t s) : address(a), size(s) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    read_in.reset();  // its thread reads the mapping: stopped first
    munmap(address, size);
  }
};

// The header, checked against the size of the file: its length, the tensors sorted by offset (tiling the
// data section exactly) and the metadata. Made without touching the data section.
struct SafeTensorsFile::Index {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

namespace {

// The header length from the first 8 bytes of a file of `size` bytes, checked against that size.
uint64_t header_length(const std::string& label, const uint8_t* field, uint64_t size) {
  if (size < kLengthFieldBytes) fail(label, ": file is ", size, " bytes, shorter than the 8-byte header length");
  const uint64_t header_bytes = read_le64(field);
  if (header_bytes == 0) fail(label, ": header length is 0, expected a JSON header");
  if (header_bytes > kMaxHeaderBytes)
    fail(label, ": header length ", header_bytes, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (header_bytes > size - kLengthFieldBytes)
    fail(label, ": header length ", header_bytes, " exceeds the ", size - kLengthFieldBytes,
         " bytes after the length field");
  return header_bytes;
}

// The bytes [offset, offset + n) of an open file, or an Error naming it.
std::string read_at(int fd, const std::string& path, uint64_t offset, uint64_t n) {
  std::string bytes(n, '\0');
  for (uint64_t done = 0; done < n;) {
    const ssize_t got = ::pread(fd, bytes.data() + done, n - done, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path, ": cannot read: ", std::strerror(errno));
    if (got == 0) fail(path, ": cannot read: the file ended at byte ", offset + done, " while being read");
    done += uint64_t(got);
  }
  return bytes;
}

// Closes the descriptor on every path out of open().
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

SafeTensorsFile::Index SafeTensorsFile::read_index(const std::string& label, std::string_view header,
                                                   uint64_t data_bytes) {
  Index index;
  const json parsed = parse_header(label, header);
  for (const auto& [key, value] : parsed.items()) {
    if (key == kMetadataKey)
      index.metadata = parse_metadata(label, value);
    else
      index.entries.push_back(parse_entry(label, key, value, data_bytes));
  }
  // JSON key order is not file order; zero-byte tensors may share an offset, hence (begin, end).
  std::sort(index.entries.begin(), index.entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  check_tiling(label, index.entries, data_bytes);
  return index;
}

SafeTensorsFile SafeTensorsFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO is refused below instead of waiting for a writer; reads of a regular file are unchanged.
  const FileDescriptor file_fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  const int fd = file_fd.fd;
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) fail(path, ": cannot stat: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path, ": not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  if (size == 0) fail(path, ": file is empty, expected at least the 8-byte header length");

  // The header is read and checked before the file is mapped: a bogus length or offset is refused at
  // once, instead of after reading gigabytes in.
  const std::string field = read_at(fd, path, 0, std::min<uint64_t>(size, kLengthFieldBytes));
  const uint64_t header_bytes = header_length(path, reinterpret_cast<const uint8_t*>(field.data()), size);
  const std::string header = read_at(fd, path, kLengthFieldBytes, header_bytes);
  Index index = read_index(path, header, size - kLengthFieldBytes - header_bytes);

  // The file is read in ahead of use, one sequential pass instead of a page fault per 4 KiB while the
  // weights are converted (a 1.7 GB checkpoint is 400k pages): a small one at once (MAP_POPULATE), a large
  // one on a thread of its own while the caller goes on.
  const bool large = size >= kBackgroundReadInBytes;
  void* address = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | (large ? 0 : MAP_POPULATE), fd, 0);
  if (address == MAP_FAILED) fail(path, ": cannot mmap: ", std::strerror(errno));
  SafeTensorsFile file;
  file.mapping_ = std::make_shared<Mapping>(address, size);  // the mapping keeps the file alive
  if (large) file.mapping_->read_in = std::make_unique<BackgroundReadIn>(address, size);
  file.label_ = path;
  const auto* bytes = static_cast<const uint8_t*>(address);
  if (std::memcmp(bytes + kLengthFieldBytes, header.data(), header.size()) != 0)
    fail(path, ": the file changed while being opened");
  file.attach(std::move(index), bytes + kLengthFieldBytes + header_bytes);
  return file;
}

SafeTensorsFile SafeTensorsFile::from_memory(const void* data, size_t size, std::string label) {
  SafeTensorsFile file;
  file.label_ = std::move(label);
  file.parse(static_cast<const uint8_t*>(data), size);
  return file;
}

SafeTensorsFile SafeTensorsFile::build(std::string label, const std::vector<TensorSpec>& specs,
                                       const std::function<void(size_t, uint8_t*)>& fill) {
  std::vector<uint64_t> sizes;
  const std::string text = header_text(label, specs, {}, sizes);
  std::vector<uint64_t> offsets;  // of each tensor in the data section
  uint64_t data_bytes = 0;
  for (uint64_t n : sizes) offsets.push_back(data_bytes), data_bytes += n;  // header_text checked the sum
  const size_t size = kLengthFieldBytes + text.size() + data_bytes;
  void* address = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) fail(label, ": cannot allocate ", size, " bytes: ", std::strerror(errno));
  SafeTensorsFile file;
  file.mapping_ = std::make_shared<Mapping>(address, size);
  file.label_ = std::move(label);

  auto* bytes = static_cast<uint8_t*>(address);
  const auto length = length_field(text.size());
  std::copy(length.begin(), length.end(), bytes);
  std::copy(text.begin(), text.end(), bytes + kLengthFieldBytes);
  uint8_t* data = bytes + kLengthFieldBytes + text.size();
  // Largest first, one tensor per task: the threads finish together although sizes span 1 to 10^7 elements.
  std::vector<size_t> order(specs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t k = 0; k < order.size(); ++k) fill(order[k], data + offsets[order[k]]);

  file.parse(bytes, size);
  return file;
}

void SafeTensorsFile::parse(const uint8_t* data, size_t size) {
  const uint64_t header_bytes = header_length(label_, data, size);
  const std::string_view header(reinterpret_cast<const char*>(data) + kLengthFieldBytes, header_bytes);
  attach(read_index(label_, header, size - kLengthFieldBytes - header_bytes),
         data + kLengthFieldBytes + header_bytes);
}

void SafeTensorsFile::attach(Index index, const uint8_t* data_section) {
  metadata_ = std::move(index.metadata);
  for (Entry& e : index.entries) {
    index_[e.name] = tensors_.size();
    tensors_.push_back(TensorView{std::move(e.name), e.dtype, std::move(e.shape), data_section + e.begin,
                                  size_t(e.end - e.begin)});
  }
}

const TensorView* SafeTensorsFile::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& SafeTensorsFile::get(std::string_view name, DType dtype,
                                       std::span<const int64_t> shape) const {
  const TensorView* t = find(name);
  if (!t) fail(label_, ": tensor ", quote(name), " is missing");
  if (t->dtype != dtype)
    fail(label_, ": tensor ", quote(name), ": expected dtype ", dtype_name(dtype), ", got ",
         dtype_name(t->dtype));
  if (!std::ranges::equal(t->shape, shape))
    fail(label_, ": tensor ", quote(name), ": expected shape ", shape_string(shape), ", got ",
         shape_string(t->shape));
  return *t;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const TensorToWrite& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  std::vector<uint64_t> sizes;
  const std::string text = header_text(path, specs, metadata, sizes);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (sizes[i] != tensors[i].bytes.size())
      fail(path, ": tensor ", quote(tensors[i].name), ": has ", tensors[i].bytes.size(), " bytes, expected shape ",
           shape_string(tensors[i].shape), " x ", dtype_name(tensors[i].dtype));
  const std::array<uint8_t, kLengthFieldBytes> length = length_field(text.size());

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(path, ": cannot write: ", std::strerror(errno));
  bool ok = std::fwrite(length.data(), 1, length.size(), f) == length.size() &&
            std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const TensorToWrite& t : tensors)  // an empty vector's data() may be null, which fwrite must not get
    ok = ok && (t.bytes.empty() || std::fwrite(t.bytes.data(), 1, t.bytes.size(), f) == t.bytes.size());
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;  // flushes: a full disk may only show here
  if (!ok || !closed) fail(path, ": cannot write: ", std::strerror(ok ? errno : write_errno));
}

}  // namespace rtvd
