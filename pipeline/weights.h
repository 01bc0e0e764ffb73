// Model weights on the host, by name. Checkpoint tensors are read once, checked for the config's dtype
// and the exact shape the architecture expects, converted to fp32 and transformed into the engine's
// layouts (conv OIHW -> OHWI, BatchNorm folded, projections fused). Backends upload them.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph.h"
#include "safetensors.h"

namespace rtvd {

struct WeightTensor {
  std::string name;
  Elem elem;  // Act: matrices in the backend's activation type; F32: per-channel vectors
  std::vector<int64_t> shape;
  std::vector<float> data;
};

class WeightStore {
 public:
  WeightStore(SafeTensorsFile file, DType dtype);

  // A checkpoint tensor as fp32 in PyTorch layout; Error when missing or of another dtype/shape.
  std::vector<float> read(const std::string& name, const std::vector<int64_t>& shape);

  // The engine-side weight `name`, made by `make` the first time and shared by later plans.
  Ref get(const std::string& name, Elem elem, const std::function<WeightTensor()>& make);

  // Every checkpoint tensor was used: a leftover means the file is for another architecture.
  void check_all_read() const;

  const std::vector<WeightTensor>& tensors() const { return tensors_; }
  const SafeTensorsFile& file() const { return file_; }
  int64_t checkpoint_parameters() const;  // elements in the checkpoint

 private:
  SafeTensorsFile file_;
  DType dtype_;
  std::map<std::string, int> read_;
  std::map<std::string, int> index_;
  std::vector<WeightTensor> tensors_;
};

// OIHW (PyTorch) -> OHWI (engine) for a conv weight of shape (o, i, kh, kw).
std::vector<float> conv_weight_to_ohwi(const std::vector<float>& oihw, int64_t o, int64_t i, int64_t kh, int64_t kw);

}  // namespace rtvd
