// A component's weights split over several safetensors files, as save_pretrained(max_shard_size=...) of
// diffusers and transformers writes a large model: shards STEM-00001-of-00002.safetensors, ... and an index
// STEM.safetensors.index.json, {"metadata": {...}, "weight_map": {tensor: shard file}}. With a variant
// (diffusers' and transformers' _add_variant): STEM.fp16-00001-of-00002.safetensors and
// STEM.safetensors.index.fp16.json.
#pragma once
#include <string>

#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

// The index's file name for a stem and a variant ("" for none).
std::string shard_index_name(const std::string& stem, const std::string& variant);
// Whether a path names an index (STEM.safetensors.index[.VARIANT].json).
bool is_shard_index(const std::string& path);

// The tensors of every shard the index at index_path names, as one set labelled by the index (an error about
// one tensor names its shard). Each shard is opened as a single file is (SafeTensorsFile::open: its header
// checked, mapped, a large one read in on a thread of its own), and must agree with the index and the folder:
// the weight_map names plain .safetensors file names of the index's folder, every one of them present, and
// no other shard of the index's name pattern is there; each tensor of each shard is in the weight_map, mapped
// to that shard, and in one shard only; the weight_map names no tensor that its shard lacks. Error, one line
// naming the file, otherwise.
TensorSet open_sharded_weights(const std::string& index_path);

}  // namespace rtvd
