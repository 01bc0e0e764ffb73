#include "weights.h"

#include <cstring>

#include "error.h"
#include "half.h"

namespace rtvd {

WeightStore::WeightStore(SafeTensorsFile file, DType dtype) : file_(std::move(file)), dtype_(dtype) {
  if (dtype_ != DType::F32 && dtype_ != DType::F16) fail(file_.label(), ": weights must be F32 or F16");
}

std::vector<float> WeightStore::read(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView& t = file_.get(name, dtype_, shape);
  read_[name] = 1;
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  if (dtype_ == DType::F32) {
    std::memcpy(out.data(), t.data, n * sizeof(float));
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = half_to_float(h);
    }
  }
  return out;
}

Ref WeightStore::get(const std::string& name, Elem elem, const std::function<WeightTensor()>& make) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    WeightTensor t = make();
    t.name = name;
    t.elem = elem;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    if (n != static_cast<int64_t>(t.data.size()))
      fail("weight '", name, "': ", t.data.size(), " values for shape ", shape_string(t.shape));
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

std::vector<float> conv_weight_to_ohwi(const std::vector<float>& oihw, int64_t o, int64_t i, int64_t kh, int64_t kw) {
  std::vector<float> out(oihw.size());
  for (int64_t a = 0; a < o; ++a)
    for (int64_t c = 0; c < i; ++c)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) out[((a * kh + y) * kw + x) * i + c] = oihw[((a * i + c) * kh + y) * kw + x];
  return out;
}

}  // namespace rtvd
