// Small safetensors files in memory for the model-file tests (tensor_set_test, single_file_test, lora_test):
// tensors from float values in a float dtype, and the values of a tensor back as doubles; the element counts
// of a file's tensors, read without rtvd's reader; packed single files rebuilt; full-size files of shapes only.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/model_files/safetensors.h"
#include "support/test_util.h"

namespace rtvd::test {

// values as dtype's bytes: F32 as they are, F16 rounded to nearest even, BF16 truncated to their top 16 bits
// (exact for values drawn with bf16_values).
std::vector<uint8_t> encode_floats(DType dtype, const std::vector<float>& values);
TensorToWrite float_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const std::vector<float>& values);
// n values exactly representable in BF16 and F16 both (8 significant bits, magnitudes 2^-6 to 2^7), random signs.
std::vector<float> bf16_values(size_t n, Rng& rng);

// The tensors as a file in memory (SafeTensorsFile::build), shared as a TensorSet keeps its files.
std::shared_ptr<const SafeTensorsFile> memory_file(const std::string& label, const std::vector<TensorToWrite>& tensors);

// Every element of a float tensor (F64, F32, F16, BF16) as a double.
std::vector<double> values_of(const TensorView& t);

// The elements of each tensor of a safetensors file, by name, from its header (8 bytes of length, then JSON)
// read here with nlohmann's parser: an independent count to check rtvd's against.
std::map<std::string, int64_t> safetensors_elements(const std::string& path);

// The tensors and metadata of a single file packed as tools/reference/pack_sd_refs.py packs one
// (NAME.manifest.json: its metadata and, in file order, each tensor's name, dtype, shape and content key, the
// crc32 and adler32 of its bytes and their count), byte for byte: each tensor's bytes found by content among
// the tensors of `sources` (weights files and the pack's extras). An Error names the manifest and a tensor not
// found.
std::vector<TensorToWrite> packed_file_tensors(const std::string& manifest, const std::vector<std::string>& sources,
                                               std::map<std::string, std::string>& metadata);

// A file of shapes only, as SafeTensorsFile::build makes one but with metadata: the header written at the start
// of an anonymous mapping whose data section is never touched, so full size costs nothing.
class ShapeOnlyFile {
 public:
  ShapeOnlyFile(const std::vector<TensorSpec>& specs, const std::map<std::string, std::string>& metadata);
  ~ShapeOnlyFile();
  ShapeOnlyFile(const ShapeOnlyFile&) = delete;
  ShapeOnlyFile& operator=(const ShapeOnlyFile&) = delete;
  SafeTensorsFile file(const std::string& label) const { return SafeTensorsFile::from_memory(data_, size_, label); }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rtvd::test
