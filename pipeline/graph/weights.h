// Model weights on the host, by name. Checkpoint tensors (a TensorSet: F16, BF16 or F32) are checked for the
// exact shape the architecture expects, then described rather than copied: an engine weight is a list of
// checkpoint tensors (views into the mapped file) in an engine layout, or per-channel floats computed at
// load. A backend writes each weight once, straight into its own memory in its own element type, so an
// fp16 checkpoint reaches an fp16 GPU without an fp32 round trip or a second host copy; a tensor with LoRA
// updates goes through one fp32 buffer of its own size, where they are merged.
#pragma once
#include <functional>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

struct WeightTensor {
  std::string name;
  Elem elem = Elem::Act;       // Act: in the backend's activation type; F32: per-channel floats
  std::vector<int64_t> shape;  // in the engine's layout
  // Act: checkpoint tensors stacked along their first dimension (q, k, v into one QKV matrix)...
  std::vector<TensorView> parts;
  bool oihw_to_ohwi = false;   // ...each a conv weight (o, i, kh, kw) stored as (o, kh, kw, i)
  std::vector<std::vector<LowRankDelta>> part_deltas;  // per part: its LoRA updates (views too)
  std::vector<float> values;   // F32: the values; Act without parts: values written in the activation type

  // A weight made of checkpoint tensors, one of floats computed at load, and one of floats in the activation type
  // (a bias as cuBLASLt's or cuDNN's fp16 epilogue reads it: LinearParams::bias_act, Conv2dParams::bias_act).
  static WeightTensor stacked(std::vector<int64_t> shape, std::vector<TensorView> parts, bool oihw_to_ohwi = false);
  static WeightTensor floats(std::vector<int64_t> shape, std::vector<float> values);
  static WeightTensor act_floats(std::vector<int64_t> shape, std::vector<float> values);

  int64_t numel() const;
  // Writes the numel() elements to dst: Act weights as `act` (F32 or F16), F32 weights as float, each part
  // with its LoRA updates merged. Large weights are written by all OpenMP threads.
  void write(void* dst, DType act) const;
};

class WeightStore {
 public:
  // Every float tensor is checked to be finite: a large checkpoint's (64 MB or more) on a thread of its own
  // begun here, which waits for the pages as they come in from the disk (background_read_in.h) while the
  // caller goes on (the engine makes its text encoder); a small one's at the first use. Every use below waits
  // for the check and throws its Error.
  explicit WeightStore(TensorSet tensors);
  explicit WeightStore(SafeTensorsFile file) : WeightStore(TensorSet(std::move(file))) {}
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Waits for the check begun at construction; an Error naming the first tensor holding NaN or Inf.
  void check_finite() const { finite_.get(); }

  // A checkpoint tensor as fp32 in PyTorch layout, LoRA updates merged; Error when missing, of another
  // shape or not a float.
  std::vector<float> read(const std::string& name, const std::vector<int64_t>& shape);
  // The same check, then the tensor itself (a view into the file, valid while the store lives).
  const TensorView& view(const std::string& name, const std::vector<int64_t>& shape);

  // The engine-side weight `name`, made by `make` the first time and shared by later plans.
  Ref get(const std::string& name, Elem elem, const std::function<WeightTensor()>& make);

  // Every checkpoint tensor was used: a leftover means the file is for another architecture.
  void check_all_read() const;

  const std::vector<WeightTensor>& tensors() const {
    check_finite();
    return tensors_;
  }
  const TensorSet& checkpoint() const {
    check_finite();
    return set_;
  }
  int64_t checkpoint_parameters() const { return checkpoint().parameters(); }

 private:
  TensorSet set_;
  std::shared_future<void> finite_;  // set_.check_finite(), begun at construction or deferred to the first use
  std::map<std::string, int> read_;
  std::map<std::string, int> index_;
  std::vector<WeightTensor> tensors_;
};

}  // namespace rtvd
