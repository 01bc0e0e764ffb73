// A model component's checkpoint tensors under the names its graph builder asks for (diffusers'), as views
// into mapped safetensors files that the set keeps alive. A diffusers folder's component file is one set as it
// stands; a single-file checkpoint gives each component the tensors under its prefix, renamed, with OpenCLIP's
// fused attention projections split into row ranges: views all, no copy of a weight on the host. LoRA's
// low-rank updates are attached here by name and merged when a weight is written (graph/weights.h).
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/model_files/safetensors.h"

namespace rtvd {

// W += scale * up down: up (out, rank) or (out, rank, 1, 1), down (rank, in) or (rank, in, kh, kw), for a
// weight (out, in) or (out, in, kh, kw).
struct LowRankDelta {
  TensorView up, down;
  float scale = 1.0f;
  std::string label;  // the LoRA file, for errors (set by add_delta)
};

class TensorSet {
 public:
  explicit TensorSet(std::string label) : label_(std::move(label)) {}
  // Every tensor of the file under its own name.
  explicit TensorSet(SafeTensorsFile file);

  // Adds `view` (a tensor of `file`, or rows of one: row_slice) under `name`; source names it in errors
  // ("model.diffusion_model.out.2.weight"). Error on a name added twice.
  void add(std::string name, const TensorView& view, std::string source, std::shared_ptr<const SafeTensorsFile> file);

  // Every tensor of `other` (with its source names, updates and files) into this set, keeping the file each
  // came from for errors: a model's components in one store. Error on a name both hold. prefix goes before
  // each name (a ControlNet's "controlnet.0.", whose names are the U-Net's); errors still name it as in the file.
  void add_all(TensorSet other, std::string_view prefix = {});

  const std::string& label() const { return label_; }
  // The file a tensor of the set came from: the set's label, or that of the set it was added from.
  const std::string& label_of(std::string_view name) const;
  const std::vector<TensorView>& tensors() const { return tensors_; }  // each named as added
  const TensorView* find(std::string_view name) const;
  // The tensor in a float dtype (F16, BF16 or F32) and exactly this shape, else an Error naming the file,
  // the tensor (its name in the file too, where that differs) and what was expected.
  const TensorView& get_float(std::string_view name, std::span<const int64_t> shape) const;
  // The tensor with `rank` dimensions, else the same kind of Error: for reading an architecture off shapes.
  const TensorView& get_rank(std::string_view name, size_t rank) const;
  // How errors name a tensor of the set: 'name', or 'name in the file' (name) where the two differ.
  std::string describe(std::string_view name) const;
  // The name in the file of a tensor of the set ("" if it has none).
  std::string source_name(std::string_view name) const;

  // Low-rank updates of a tensor, merged when it is written. The factors are checked here (shapes that make an
  // update of the tensor, float dtypes, finite values), each error naming file (the LoRA) and the factors.
  void add_delta(std::string_view name, const LowRankDelta& delta, std::shared_ptr<const SafeTensorsFile> file);
  const std::vector<LowRankDelta>* deltas(std::string_view name) const;

  // Every float tensor finite, else an Error naming the tensor and the first bad element.
  void check_finite() const;
  int64_t parameters() const;  // elements of every tensor

 private:
  struct Entry {
    std::string source;
    std::vector<LowRankDelta> deltas;
    std::string label;  // "" = the set's
  };
  std::string label_;
  std::vector<TensorView> tensors_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> index_;
  std::vector<std::shared_ptr<const SafeTensorsFile>> files_;

  const Entry* entry(std::string_view name) const;
  void keep(std::shared_ptr<const SafeTensorsFile> file);
};

// Rows [begin, end) of a row-major tensor (dimension 0), as a view named `name`.
TensorView row_slice(const TensorView& t, int64_t begin, int64_t end, std::string name);
// The same bytes under another shape of as many elements (a (C, C, 1, 1) conv as a (C, C) linear weight).
TensorView reshaped(const TensorView& t, std::vector<int64_t> shape);

// The index of a float tensor's first NaN or infinity, or numel() when it has none (and for integer dtypes).
int64_t first_non_finite(const TensorView& t);

// Element i of a float tensor (F64, F32, F16 or BF16) as a float.
float float_element(const TensorView& t, int64_t i);

}  // namespace rtvd
