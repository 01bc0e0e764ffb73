#include "pipeline/model_files/weights.h"

#include <algorithm>
#include <cstring>

#include "kernels/common/error.h"
#include "pipeline/model_files/half.h"

namespace rtvd {

namespace {

// Below this many elements a weight is written by one thread: a parallel region costs more than it saves.
constexpr int64_t kParallelElements = int64_t(1) << 16;

// Element i of a checkpoint tensor (F32 or F16; memcpy: safetensors offsets need not be aligned).
template <DType S>
float load(const uint8_t* data, int64_t i) {
  if constexpr (S == DType::F32) {
    float f;
    std::memcpy(&f, data + 4 * i, 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    return half_to_float(h);
  }
}

// One element from src (dtype S) to dst (dtype D); same dtype: the bytes, no rounding.
template <DType S, DType D>
void convert(const uint8_t* src, uint8_t* dst) {
  if constexpr (S == D) {
    std::memcpy(dst, src, S == DType::F32 ? 4 : 2);
  } else if constexpr (D == DType::F32) {
    const float f = load<S>(src, 0);
    std::memcpy(dst, &f, 4);
  } else {
    const uint16_t h = float_to_half(load<S>(src, 0));
    std::memcpy(dst, &h, 2);
  }
}

// One checkpoint tensor into dst, as it is or reordered OIHW -> OHWI.
template <DType S, DType D>
void write_part(const TensorView& part, uint8_t* dst, bool oihw_to_ohwi) {
  constexpr int64_t kS = S == DType::F32 ? 4 : 2, kD = D == DType::F32 ? 4 : 2;
  const uint8_t* src = part.data;
  const int64_t n = part.numel();
  if (!oihw_to_ohwi) {
    if constexpr (S == D) {
      constexpr int64_t kChunk = int64_t(1) << 20;  // bytes per task
      const int64_t bytes = n * kS, chunks = (bytes + kChunk - 1) / kChunk;
#pragma omp parallel for if (n >= kParallelElements)
      for (int64_t k = 0; k < chunks; ++k)
        std::memcpy(dst + k * kChunk, src + k * kChunk, size_t(std::min(kChunk, bytes - k * kChunk)));
    } else {
#pragma omp parallel for if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) convert<S, D>(src + kS * i, dst + kD * i);
    }
    return;
  }
  const int64_t out = part.shape[0], in = part.shape[1], taps = part.shape[2] * part.shape[3];
#pragma omp parallel for if (n >= kParallelElements)
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < in; ++c)
      for (int64_t t = 0; t < taps; ++t) convert<S, D>(src + kS * ((o * in + c) * taps + t), dst + kD * ((o * taps + t) * in + c));
}

}  // namespace

WeightTensor WeightTensor::stacked(std::vector<int64_t> shape, std::vector<TensorView> parts, bool oihw_to_ohwi) {
  WeightTensor t;
  t.shape = std::move(shape);
  t.parts = std::move(parts);
  t.oihw_to_ohwi = oihw_to_ohwi;
  return t;
}

WeightTensor WeightTensor::floats(std::vector<int64_t> shape, std::vector<float> values) {
  WeightTensor t;
  t.elem = Elem::F32;
  t.shape = std::move(shape);
  t.values = std::move(values);
  return t;
}

int64_t WeightTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void WeightTensor::write(void* dst, DType act) const {
  if (elem == Elem::F32) {
    std::memcpy(dst, values.data(), values.size() * sizeof(float));
    return;
  }
  auto* out = static_cast<uint8_t*>(dst);
  for (const TensorView& p : parts) {
    const bool f32_in = p.dtype == DType::F32, f32_out = act == DType::F32;
    if (f32_in && f32_out) write_part<DType::F32, DType::F32>(p, out, oihw_to_ohwi);
    if (f32_in && !f32_out) write_part<DType::F32, DType::F16>(p, out, oihw_to_ohwi);
    if (!f32_in && f32_out) write_part<DType::F16, DType::F32>(p, out, oihw_to_ohwi);
    if (!f32_in && !f32_out) write_part<DType::F16, DType::F16>(p, out, oihw_to_ohwi);
    out += p.numel() * (f32_out ? 4 : 2);
  }
}

WeightStore::WeightStore(SafeTensorsFile file, DType dtype) : file_(std::move(file)), dtype_(dtype) {
  if (dtype_ != DType::F32 && dtype_ != DType::F16) fail(file_.label(), ": weights must be F32 or F16");
}

const TensorView& WeightStore::view(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView& t = file_.get(name, dtype_, shape);
  read_[name] = 1;
  return t;
}

std::vector<float> WeightStore::read(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView& t = view(name, shape);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = dtype_ == DType::F32 ? load<DType::F32>(t.data, int64_t(i)) : load<DType::F16>(t.data, int64_t(i));
  return out;
}

Ref WeightStore::get(const std::string& name, Elem elem, const std::function<WeightTensor()>& make) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    WeightTensor t = make();
    t.name = name;
    t.elem = elem;
    int64_t have = int64_t(t.values.size());
    if (elem != Elem::F32) {
      have = 0;
      for (const TensorView& p : t.parts) {
        if (t.oihw_to_ohwi && p.shape.size() != 4) fail("weight '", name, "': part '", p.name, "' is not a conv weight");
        have += p.numel();
      }
    }
    if (have != t.numel()) fail("weight '", name, "': ", have, " values for shape ", shape_string(t.shape));
    it = index_.emplace(name, static_cast<int>(tensors_.size())).first;
    tensors_.push_back(std::move(t));
  }
  return Ref{Ref::Weight, it->second, 0};
}

void WeightStore::check_all_read() const {
  for (const TensorView& t : file_.tensors())
    if (!read_.count(t.name))
      fail(file_.label(), ": unexpected tensor '", t.name, "' (not a parameter of this config's architecture)");
}

int64_t WeightStore::checkpoint_parameters() const {
  int64_t n = 0;
  for (const TensorView& t : file_.tensors()) n += t.numel();
  return n;
}

}  // namespace rtvd
