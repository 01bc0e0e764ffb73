#include "support/tensor_files.h"

#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <zlib.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/half.h"
#include "pipeline/model_files/tensor_set.h"
#include "support/test_util.h"

namespace rtvd::test {

std::vector<uint8_t> encode_floats(DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    if (dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &bits, 4);
    } else {
      const uint16_t h = dtype == DType::F16 ? float_to_half(values[i]) : uint16_t(bits >> 16);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

TensorToWrite float_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const std::vector<float>& values) {
  return {name, dtype, std::move(shape), encode_floats(dtype, values)};
}

std::vector<float> bf16_values(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(float(rng.integer(128, 255)), rng.integer(-13, -1)) * (rng.integer(0, 1) ? 1.0f : -1.0f);
  return v;
}

std::shared_ptr<const SafeTensorsFile> memory_file(const std::string& label, const std::vector<TensorToWrite>& tensors) {
  std::vector<TensorSpec> specs;
  for (const TensorToWrite& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  return std::make_shared<const SafeTensorsFile>(SafeTensorsFile::build(label, specs, [&](size_t i, uint8_t* data) {
    std::memcpy(data, tensors[i].bytes.data(), tensors[i].bytes.size());
  }));
}

std::vector<double> values_of(const TensorView& t) {
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float_element(t, int64_t(i));
  return v;
}

std::map<std::string, int64_t> safetensors_elements(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t length = 0;
  f.read(reinterpret_cast<char*>(&length), 8);
  std::string header(length, '\0');
  f.read(header.data(), std::streamsize(length));
  if (!f) fail(path, ": cannot read a safetensors header");
  std::map<std::string, int64_t> out;
  const nlohmann::json doc = nlohmann::json::parse(header);
  for (const auto& [name, t] : doc.items()) {
    if (name == "__metadata__") continue;
    int64_t n = 1;
    for (const auto& d : t.at("shape")) n *= d.get<int64_t>();
    out[name] = n;
  }
  return out;
}

namespace {

std::string content_key(const uint8_t* data, size_t n) {
  const uLong crc = crc32(0, data, uInt(n)), adler = adler32(1, data, uInt(n));
  char key[64];
  std::snprintf(key, sizeof key, "%08lx-%08lx-%zu", crc, adler, n);
  return key;
}

}  // namespace

std::vector<TensorToWrite> packed_file_tensors(const std::string& manifest, const std::vector<std::string>& sources,
                                               std::map<std::string, std::string>& metadata) {
  std::vector<SafeTensorsFile> files;
  for (const std::string& s : sources) files.push_back(SafeTensorsFile::open(s));
  std::map<std::string, const TensorView*> by_content;
  for (const SafeTensorsFile& f : files)
    for (const TensorView& t : f.tensors()) by_content.emplace(content_key(t.data, t.bytes), &t);
  const nlohmann::json m = parse_config_object(read_config_file(manifest), manifest);
  for (const auto& [k, v] : m.at("metadata").items()) metadata[k] = v.get<std::string>();
  std::vector<TensorToWrite> out;
  for (const nlohmann::json& row : m.at("tensors")) {
    const auto it = by_content.find(row[3].get<std::string>());
    if (it == by_content.end()) fail(manifest, ": no tensor with the content of ", row[0]);
    const std::string dtype = row[1].get<std::string>();
    DType d = DType::F16;
    for (DType c : {DType::F16, DType::F32, DType::BF16, DType::I64})
      if (dtype == dtype_name(c)) d = c;
    out.push_back({row[0].get<std::string>(), d, row[2].get<std::vector<int64_t>>(),
                   std::vector<uint8_t>(it->second->data, it->second->data + it->second->bytes)});
  }
  return out;
}

ShapeOnlyFile::ShapeOnlyFile(const std::vector<TensorSpec>& specs, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const TensorSpec& s : specs) {
    size_t bytes = dtype_size(s.dtype);
    for (int64_t d : s.shape) bytes *= size_t(d);
    header[s.name] = {{"dtype", dtype_name(s.dtype)}, {"shape", s.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  size_ = 8 + text.size() + offset;
  data_ = static_cast<uint8_t*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (data_ == MAP_FAILED) fail("mmap of ", size_, " bytes failed");
  const uint64_t n = text.size();
  std::memcpy(data_, &n, 8);
  std::memcpy(data_ + 8, text.data(), text.size());
}

ShapeOnlyFile::~ShapeOnlyFile() { munmap(data_, size_); }

}  // namespace rtvd::test
