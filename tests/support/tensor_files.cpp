#include "support/tensor_files.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

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

}  // namespace rtvd::test
