#include "pipeline/model_files/tensor_set.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/half.h"

namespace rtvd {

namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// A float is NaN or infinite exactly when its exponent bits are all ones; then adding the exponent's lowest
// bit to them carries into the top bit, which no finite value reaches. An OR of that over a block (adds, ands
// and ors, no branch) vectorises: one thread checks ~10 GB/s (a 1.7 GB checkpoint in 0.15 s, the default
// model in 1 ms), so no parallel region, whose threads may spin on a busy machine, is worth starting.
template <class Bits, Bits kExponent>
Bits exponent_carry(const uint8_t* data, int64_t i) {
  Bits b;
  std::memcpy(&b, data + i * int64_t(sizeof(Bits)), sizeof(Bits));  // offsets in the file need not be aligned
  return Bits((b & kExponent) + (kExponent & (~kExponent + 1)));
}

// The index of the first NaN or infinity among n elements, or n; only a block that has one is searched.
template <class Bits, Bits kExponent>
int64_t first_non_finite_bits(const uint8_t* data, int64_t n) {
  constexpr Bits kTop = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  constexpr int64_t kBlock = 4096;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    Bits any = 0;
    for (int64_t i = begin; i < end; ++i) any |= exponent_carry<Bits, kExponent>(data, i);
    if (!(any & kTop)) continue;
    for (int64_t i = begin; i < end; ++i)
      if (exponent_carry<Bits, kExponent>(data, i) & kTop) return i;
  }
  return n;
}

const char* non_finite_name(float v) { return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; }

// Whether a delta's factors fit the weight: up (out, r[, 1, 1]), down (r, in[, kh, kw]).
bool delta_fits(const TensorView& w, const LowRankDelta& d) {
  const auto& ws = w.shape;
  const auto& u = d.up.shape;
  const auto& v = d.down.shape;
  if (ws.size() != 2 && ws.size() != 4) return false;
  if (u.size() != ws.size() || v.size() != ws.size() || u[0] != ws[0] || u[1] != v[0] || v[1] != ws[1]) return false;
  if (ws.size() == 4) return u[2] == 1 && u[3] == 1 && v[2] == ws[2] && v[3] == ws[3];
  return true;
}

}  // namespace

float float_element(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::F64: { double d; std::memcpy(&d, t.data + 8 * i, 8); return float(d); }
    case DType::F32: { float f; std::memcpy(&f, t.data + 4 * i, 4); return f; }
    case DType::F16: { uint16_t h; std::memcpy(&h, t.data + 2 * i, 2); return half_to_float(h); }
    case DType::BF16: {  // the top half of a float
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      const uint32_t bits = uint32_t(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default: fail("tensor ", quote(t.name), ": ", dtype_name(t.dtype), " is not a float dtype");
  }
}

TensorView row_slice(const TensorView& t, int64_t begin, int64_t end, std::string name) {
  if (t.shape.empty() || begin < 0 || end > t.shape[0] || begin >= end)
    fail("tensor ", quote(t.name), ": rows [", begin, ", ", end, ") of shape ", shape_string(t.shape));
  const int64_t row_bytes = t.shape[0] > 0 ? int64_t(t.bytes) / t.shape[0] : 0;
  TensorView v = t;
  v.name = std::move(name);
  v.shape[0] = end - begin;
  v.data = t.data + begin * row_bytes;
  v.bytes = size_t((end - begin) * row_bytes);
  return v;
}

TensorView reshaped(const TensorView& t, std::vector<int64_t> shape) {
  if (checked_numel(shape, cat("tensor ", quote(t.name))) != t.numel())
    fail("tensor ", quote(t.name), ": shape ", shape_string(t.shape), " cannot be viewed as ", shape_string(shape));
  TensorView v = t;
  v.shape = std::move(shape);
  return v;
}

int64_t first_non_finite(const TensorView& t) {
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::F64: return first_non_finite_bits<uint64_t, 0x7ff0000000000000ull>(t.data, n);
    case DType::F32: return first_non_finite_bits<uint32_t, 0x7f800000u>(t.data, n);
    case DType::F16: return first_non_finite_bits<uint16_t, 0x7c00>(t.data, n);
    case DType::BF16: return first_non_finite_bits<uint16_t, 0x7f80>(t.data, n);
    default: return n;  // integer tensors are finite
  }
}

TensorSet::TensorSet(SafeTensorsFile file) : label_(file.label()) {
  auto shared = std::make_shared<const SafeTensorsFile>(std::move(file));
  for (const TensorView& t : shared->tensors()) add(t.name, t, "", shared);
}

void TensorSet::keep(std::shared_ptr<const SafeTensorsFile> file) {
  if (file && std::find(files_.begin(), files_.end(), file) == files_.end()) files_.push_back(std::move(file));
}

void TensorSet::add(std::string name, const TensorView& view, std::string source,
                    std::shared_ptr<const SafeTensorsFile> file) {
  if (index_.count(name))
    fail(label_, ": tensor ", quote(name), " given twice", source.empty() ? "" : cat(" (by ", quote(source), ")"));
  keep(std::move(file));
  index_.emplace(name, tensors_.size());
  TensorView v = view;
  v.name = std::move(name);
  tensors_.push_back(std::move(v));
  entries_.push_back(Entry{source == tensors_.back().name ? "" : std::move(source), {}, ""});
}

const TensorSet::Entry* TensorSet::entry(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void TensorSet::add_all(TensorSet other, std::string_view prefix) {
  for (size_t i = 0; i < other.tensors_.size(); ++i) {
    const std::string name = cat(prefix, other.tensors_[i].name);
    if (index_.count(name))
      fail(other.label_of(other.tensors_[i].name), ": tensor ", quote(name), " is also in ", label_of(name),
           " (two components share a name)");
    Entry e = std::move(other.entries_[i]);
    if (e.label.empty()) e.label = other.label_;
    if (e.source.empty() && !prefix.empty()) e.source = other.tensors_[i].name;
    index_.emplace(name, tensors_.size());
    other.tensors_[i].name = name;
    tensors_.push_back(std::move(other.tensors_[i]));
    entries_.push_back(std::move(e));
  }
  for (auto& f : other.files_) keep(std::move(f));
}

const std::string& TensorSet::label_of(std::string_view name) const {
  const Entry* e = entry(name);
  return e && !e->label.empty() ? e->label : label_;
}

const TensorView* TensorSet::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::string TensorSet::source_name(std::string_view name) const {
  const Entry* e = entry(name);
  return e ? e->source : "";
}

std::string TensorSet::describe(std::string_view name) const {
  const std::string source = source_name(name);
  return source.empty() ? quote(name) : cat(quote(source), " (", printable(name), ")");
}

const TensorView& TensorSet::get_float(std::string_view name, std::span<const int64_t> shape) const {
  const TensorView* t = find(name);
  if (!t) fail(label_, ": tensor ", quote(name), " is missing");
  if (!is_float(t->dtype))
    fail(label_of(name), ": tensor ", describe(name), ": expected dtype F16, BF16 or F32, got ", dtype_name(t->dtype));
  if (!std::ranges::equal(t->shape, shape))
    fail(label_of(name), ": tensor ", describe(name), ": expected shape ", shape_string(shape), ", got ", shape_string(t->shape));
  return *t;
}

const TensorView& TensorSet::get_rank(std::string_view name, size_t rank) const {
  const TensorView* t = find(name);
  if (!t) fail(label_, ": tensor ", quote(name), " is missing");
  if (t->shape.size() != rank)
    fail(label_of(name), ": tensor ", describe(name), ": expected ", rank, " dimensions, got shape ", shape_string(t->shape));
  return *t;
}

void TensorSet::add_delta(std::string_view name, const LowRankDelta& delta, std::shared_ptr<const SafeTensorsFile> file) {
  const std::string lora = file ? file->label() : label_;
  const auto it = index_.find(name);
  if (it == index_.end()) fail(lora, ": no tensor ", quote(name), " in ", label_, " for the update ", quote(delta.up.name));
  const TensorView& w = tensors_[it->second];
  if (!delta_fits(w, delta))
    fail(lora, ": ", quote(delta.up.name), " ", shape_string(delta.up.shape), " and ", quote(delta.down.name), " ",
         shape_string(delta.down.shape), " do not make an update of ", quote(name), " ", shape_string(w.shape),
         " (expected up (out, rank) and down (rank, in), or a conv's (out, rank, 1, 1) and (rank, in, kh, kw))");
  for (const TensorView* f : {&delta.up, &delta.down}) {
    if (!is_float(f->dtype))
      fail(lora, ": ", quote(f->name), ": a LoRA factor must be F16, BF16 or F32, got ", dtype_name(f->dtype));
    const int64_t bad = first_non_finite(*f);
    if (bad != f->numel())
      fail(lora, ": ", quote(f->name), " holds ", non_finite_name(float_element(*f, bad)), " at element ", bad, " of ",
           shape_string(f->shape), ", expected finite values");
  }
  if (!std::isfinite(delta.scale))
    fail(lora, ": the update of ", quote(name), " by ", quote(delta.up.name), " has scale ", delta.scale);
  keep(std::move(file));
  entries_[it->second].deltas.push_back(delta);
  entries_[it->second].deltas.back().label = lora;
}

const std::vector<LowRankDelta>* TensorSet::deltas(std::string_view name) const {
  const Entry* e = entry(name);
  return e && !e->deltas.empty() ? &e->deltas : nullptr;
}

void TensorSet::check_finite() const {
  for (const TensorView& t : tensors_) {
    const int64_t bad = first_non_finite(t);
    if (bad == t.numel()) continue;
    const std::string source = source_name(t.name);
    fail(label_of(t.name), ": tensor ", quote(source.empty() ? t.name : source), " holds ",
         non_finite_name(float_element(t, bad)), " at element ", bad, " of ", shape_string(t.shape), ", expected finite weights");
  }
}

int64_t TensorSet::parameters() const {
  int64_t n = 0;
  for (const TensorView& t : tensors_) n = checked_add(n, t.numel(), label_);
  return n;
}

}  // namespace rtvd
