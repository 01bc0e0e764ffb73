#include "pipeline/graph/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/half.h"

namespace rtvd {

namespace {

// Below this many elements a weight is written by one thread: a parallel region costs more than it saves.
constexpr int64_t kParallelElements = int64_t(1) << 16;

// Element i of a checkpoint tensor (memcpy: safetensors offsets need not be aligned).
template <DType S>
float load(const uint8_t* data, int64_t i) {
  if constexpr (S == DType::F32) {
    float f;
    std::memcpy(&f, data + 4 * i, 4);
    return f;
  } else if constexpr (S == DType::F16) {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    return half_to_float(h);
  } else {  // BF16: the top half of a float
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    const uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
}

constexpr int64_t size_of(DType t) { return t == DType::F32 ? 4 : 2; }

// One element from src (dtype S) to dst (F32 or F16); the same dtype: the bytes, no rounding.
template <DType S, DType D>
void convert(const uint8_t* src, uint8_t* dst) {
  if constexpr (S == D) {
    std::memcpy(dst, src, size_t(size_of(S)));
  } else if constexpr (D == DType::F32) {
    const float f = load<S>(src, 0);
    std::memcpy(dst, &f, 4);
  } else {
    const uint16_t h = float_to_half(load<S>(src, 0));
    std::memcpy(dst, &h, 2);
  }
}

// One tensor (dtype S) into dst (dtype D), as it is or reordered OIHW -> OHWI.
template <DType S, DType D>
void write_part(const uint8_t* src, const std::vector<int64_t>& shape, int64_t n, uint8_t* dst, bool oihw_to_ohwi) {
  constexpr int64_t kS = size_of(S), kD = size_of(D);
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
  const int64_t out = shape[0], in = shape[1], taps = shape[2] * shape[3];
#pragma omp parallel for if (n >= kParallelElements)
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < in; ++c)
      for (int64_t t = 0; t < taps; ++t) convert<S, D>(src + kS * ((o * in + c) * taps + t), dst + kD * ((o * taps + t) * in + c));
}

template <DType D>
void write_any(const TensorView& t, const uint8_t* src, DType s, uint8_t* dst, bool oihw_to_ohwi) {
  switch (s) {
    case DType::F32: return write_part<DType::F32, D>(src, t.shape, t.numel(), dst, oihw_to_ohwi);
    case DType::F16: return write_part<DType::F16, D>(src, t.shape, t.numel(), dst, oihw_to_ohwi);
    case DType::BF16: return write_part<DType::BF16, D>(src, t.shape, t.numel(), dst, oihw_to_ohwi);
    default: fail("weight part ", quote(t.name), ": ", dtype_name(s), " is not F16, BF16 or F32");
  }
}

// The tensor as fp32 in its own layout, with W += scale * up down for each update (a conv's up is
// (out, r, 1, 1) and down (r, in, kh, kw): the product is (out, in kh kw), the weight's own layout). Finite
// factors can still overflow float, or, for a weight written as fp16 (the GPU's weights), make an element
// that fp16 rounds to Inf (|w| >= 65520): either is an Error naming the LoRA, the updates and the tensor.
std::vector<float> merged(const TensorView& t, const std::vector<LowRankDelta>& deltas, DType written_as) {
  const int64_t n = t.numel(), out = t.shape[0], cols = out > 0 ? n / out : 0;
  std::vector<float> w(size_t(n), 0.0f);
#pragma omp parallel for if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = float_element(t, i);
  for (const LowRankDelta& d : deltas) {
    const int64_t rank = d.up.shape[1];
    std::vector<float> down(size_t(rank * cols));
    for (int64_t i = 0; i < rank * cols; ++i) down[size_t(i)] = float_element(d.down, i);
#pragma omp parallel for if (n >= kParallelElements)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t r = 0; r < rank; ++r) {
        const float u = d.scale * float_element(d.up, o * rank + r);
        const float* row = down.data() + r * cols;
        float* dst = w.data() + o * cols;
        for (int64_t c = 0; c < cols; ++c) dst[c] += u * row[c];
      }
  }
  const bool half = written_as == DType::F16;
  for (int64_t i = 0; i < n; ++i) {
    const float v = w[size_t(i)];
    if (std::isfinite(half ? half_to_float(float_to_half(v)) : v)) continue;
    fail(deltas[0].label, ": the LoRA update of ", quote(t.name), " (", quote(deltas[0].up.name), " x ",
         quote(deltas[0].down.name), deltas.size() > 1 ? cat(" and ", deltas.size() - 1, " more") : "",
         ") makes element ", i, " of ", shape_string(t.shape), " ", v,
         std::isfinite(v) ? ", beyond fp16's range (65504), the GPU's weights: lower the LoRA's scale"
                          : ", expected finite weights");
  }
  return w;
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

WeightTensor WeightTensor::act_floats(std::vector<int64_t> shape, std::vector<float> values) {
  WeightTensor t = floats(std::move(shape), std::move(values));
  t.elem = Elem::Act;
  return t;
}

int64_t WeightTensor::numel() const { return checked_numel(shape, "engine weight"); }

void WeightTensor::write(void* dst, DType act) const {
  if (elem == Elem::F32 || (parts.empty() && act == DType::F32)) {
    std::memcpy(dst, values.data(), values.size() * sizeof(float));
    return;
  }
  if (parts.empty()) {  // act_floats() in fp16
    auto* half = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < values.size(); ++i) half[i] = float_to_half(values[i]);
    return;
  }
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorView& p = parts[i];
    std::vector<float> with_deltas;
    const uint8_t* src = p.data;
    DType src_type = p.dtype;
    if (i < part_deltas.size() && !part_deltas[i].empty()) {
      with_deltas = merged(p, part_deltas[i], act);
      src = reinterpret_cast<const uint8_t*>(with_deltas.data());
      src_type = DType::F32;
    }
    if (act == DType::F32) write_any<DType::F32>(p, src, src_type, out, oihw_to_ohwi);
    else write_any<DType::F16>(p, src, src_type, out, oihw_to_ohwi);
    out += p.numel() * size_of(act);
  }
}

namespace {

// A large checkpoint's check (from the size at which SafeTensorsFile reads a file in on a thread) runs on a
// thread of its own, waiting for the pages as they come in; a small one's (the default model, tests, fuzz
// inputs) at its first use, on the caller's thread.
std::shared_future<void> check_finite_async(const TensorSet& set) {
  uint64_t bytes = 0;
  for (const TensorView& t : set.tensors()) bytes += t.bytes;
  const bool large = bytes >= SafeTensorsFile::kBackgroundReadInBytes;
  const auto policy = large ? std::launch::async : std::launch::deferred;
  return std::async(policy, [set] { set.check_finite(); }).share();  // a copy of the views: the store may move
}

}  // namespace

WeightStore::WeightStore(TensorSet tensors) : set_(std::move(tensors)), finite_(check_finite_async(set_)) {}

const TensorView& WeightStore::view(const std::string& name, const std::vector<int64_t>& shape) {
  check_finite();
  const TensorView& t = set_.get_float(name, shape);
  read_[name] = 1;
  return t;
}

std::vector<float> WeightStore::read(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView& t = view(name, shape);
  if (const std::vector<LowRankDelta>* d = set_.deltas(name)) return merged(t, *d, DType::F32);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = float_element(t, int64_t(i));
  return out;
}

Ref WeightStore::get(const std::string& name, Elem elem, const std::function<WeightTensor()>& make) {
  check_finite();
  auto it = index_.find(name);
  if (it == index_.end()) {
    WeightTensor t = make();
    t.name = name;
    t.elem = elem;
    int64_t have = int64_t(t.values.size());
    if (elem != Elem::F32 && !t.parts.empty()) {  // (an Act weight without parts holds values: act_floats())
      have = 0;
      for (const TensorView& p : t.parts) {
        if (t.oihw_to_ohwi && p.shape.size() != 4)
          fail("weight ", quote(name), ": part ", quote(p.name), " is not a conv weight");
        have += p.numel();
      }
    }
    if (have != t.numel()) fail("weight ", quote(name), ": ", have, " values for shape ", shape_string(t.shape));
    for (const TensorView& p : t.parts) {
      const std::vector<LowRankDelta>* d = set_.deltas(p.name);
      t.part_deltas.push_back(d ? *d : std::vector<LowRankDelta>{});
    }
    it = index_.emplace(name, static_cast<int>(tensors_.size())).first;
    tensors_.push_back(std::move(t));
  }
  return Ref{Ref::Weight, it->second, 0};
}

void WeightStore::check_all_read() const {
  check_finite();
  for (const TensorView& t : set_.tensors())
    if (!read_.count(t.name)) {
      const std::string source = set_.source_name(t.name);
      fail(set_.label_of(t.name), ": unexpected tensor ", quote(source.empty() ? t.name : source),
           " (not a parameter of this config's architecture)");
    }
}

}  // namespace rtvd
