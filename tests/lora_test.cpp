// LoRA files (pipeline/model_files/lora.h) against diffusers: one random LoRA of tests/data/tiny_sd's U-Net
// (attention, feed-forward, projections, ResNet convs and time projections, down/upsampler convs) and text
// encoder (q/k/v/out, MLP) in PEFT's, diffusers' and kohya's formats (export_sd_references.py), merged at scale
// 0.7 and read back through a WeightStore, against the weights diffusers' load_lora_weights + fuse_lora changed
// for the PEFT file (a sketch of them: tests/data/lora/lora_fused_sketch.json, pack_sd_refs.py). diffusers
// itself failed on the kohya file and left the attention updates of its own format unfused (refs log.txt):
// both are compared with the PEFT result, which the three files define alike. Then formats derived here
// (kohya with the original layout's names, the attention-processor keys, alpha from diffusers' metadata), and
// every bad file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>
#include <set>

#include <nlohmann/json.hpp>

#include "pipeline/graph/weights.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/ldm_layout.h"
#include "pipeline/model_files/lora.h"
#include "support/tensor_files.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;
using test::error_of;

std::string tiny_sd(const std::string& rel) { return test::test_data("tiny_sd/" + rel); }
std::string lora_data(const std::string& name) { return test::test_data("lora/" + name); }

struct Model {
  TensorSet unet{SafeTensorsFile::open(tiny_sd("unet/diffusion_pytorch_model.safetensors"))};
  TensorSet text_encoder{SafeTensorsFile::open(tiny_sd("text_encoder/model.safetensors"))};
};

// pack_sd_refs.py's sign(): +1 or -1 from splitmix64 of (projection << 40) + element.
double sign(uint64_t p, uint64_t i) {
  uint64_t x = (p << 40) + i + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (x >> 63) ? -1.0 : 1.0;
}

const json& fused_sketch() {
  static const json sketch = [] {
    const std::string path = lora_data("lora_fused_sketch.json");
    return parse_config_object(read_config_file(path), path).at("weights");
  }();
  return sketch;
}

// Every weight diffusers' fuse_lora changed, read through a WeightStore, against its sketch: relative L2 error
// (estimated from 16 random-sign projections: each differs from diffusers' by a N(0, |error|^2) draw) and the
// norm within 1e-5, and 32 sampled elements within 1e-5 of the weight's RMS; every other weight bit for bit
// as the checkpoint has it.
void expect_fused_as_diffusers(Model m, const std::string& what) {
  SCOPED_TRACE(what);
  const TensorSet unet_before(SafeTensorsFile::open(tiny_sd("unet/diffusion_pytorch_model.safetensors")));
  const TensorSet text_before(SafeTensorsFile::open(tiny_sd("text_encoder/model.safetensors")));
  std::set<std::string> updated;
  for (const auto* set : {&m.unet, &m.text_encoder})
    for (const TensorView& t : set->tensors())
      if (set->deltas(t.name)) updated.insert((set == &m.unet ? "unet." : "text_encoder.") + t.name);
  std::set<std::string> want;
  for (const auto& [name, _] : fused_sketch().items()) want.insert(name);
  EXPECT_EQ(updated, want);

  WeightStore unet(std::move(m.unet)), text(std::move(m.text_encoder));
  for (const auto& [name, s] : fused_sketch().items()) {
    const bool in_unet = name.starts_with("unet.");
    WeightStore& store = in_unet ? unet : text;
    const std::vector<float> got = store.read(name.substr(in_unet ? 5 : 13), s.at("shape").get<std::vector<int64_t>>());
    const double l2 = s.at("l2").get<double>();
    double norm = 0, squared_error = 0;
    for (float v : got) norm += double(v) * v;
    const json& projections = s.at("projections");
    for (size_t p = 0; p < projections.size(); ++p) {
      double proj = 0;
      for (size_t i = 0; i < got.size(); ++i) proj += sign(p, i) * got[i];
      squared_error += std::pow(proj - projections[p].get<double>(), 2);
    }
    const double rel_error = std::sqrt(squared_error / double(projections.size())) / l2;
    EXPECT_LE(rel_error, 1e-5) << name;
    EXPECT_NEAR(std::sqrt(norm), l2, 1e-5 * l2) << name;
    const double rms = l2 / std::sqrt(double(got.size()));
    for (const json& sample : s.at("samples")) {
      const size_t i = sample[0].get<size_t>();
      EXPECT_NEAR(got.at(i), sample[1].get<double>(), 1e-5 * rms) << name << " element " << i;
    }
  }
  for (const auto& [store, before, prefix] : {std::tuple{&unet, &unet_before, "unet."}, std::tuple{&text, &text_before, "text_encoder."}})
    for (const TensorView& t : before->tensors()) {
      if (want.contains(prefix + t.name) || t.dtype != DType::F16) continue;
      const std::vector<float> got = store->read(t.name, t.shape);
      const std::vector<double> original = test::values_of(t);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], original[i]) << prefix << t.name << " is not updated";
    }
}

class LoraFormat : public ::testing::TestWithParam<const char*> {};

TEST_P(LoraFormat, FusesAsDiffusersDoes) {
  Model m;
  apply_lora(parse_lora_spec(lora_data(cat("lora_", GetParam(), ".safetensors:0.7"))), m.unet, &m.text_encoder);
  expect_fused_as_diffusers(std::move(m), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Refs, LoraFormat, ::testing::Values("peft", "diffusers", "kohya"));

// A LoRA file of refs' format, rewritten: each key through rename ("" drops it) and each tensor through
// values; written with metadata in dir.
std::string rewritten(const test::TempDir& dir, const std::string& format, const std::function<std::string(const std::string&)>& rename,
                      const std::function<void(const std::string&, std::vector<float>&)>& values = {},
                      const std::map<std::string, std::string>& metadata = {}) {
  const SafeTensorsFile in = SafeTensorsFile::open(lora_data("lora_" + format + ".safetensors"));
  std::vector<TensorToWrite> out;
  for (const TensorView& t : in.tensors()) {
    const std::string name = rename(t.name);
    if (name.empty()) continue;
    std::vector<float> v;
    for (double x : test::values_of(t)) v.push_back(float(x));
    if (values) values(t.name, v);
    out.push_back(test::float_tensor(name, t.dtype, t.shape, v));
  }
  const std::string path = dir.path("lora_" + format + "_rewritten.safetensors");
  write_safetensors(path, out, metadata);
  return path;
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  if (const size_t at = s.find(from); at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// kohya's files for some models name the U-Net's modules as the original layout does (input_blocks_1_1_...).
TEST(LoraDerivedFormats, KohyaWithTheOriginalLayoutsNames) {
  test::TempDir dir;
  Model m;
  std::vector<std::string> names;
  for (const TensorView& t : m.unet.tensors()) names.push_back(t.name);
  std::map<std::string, std::string> original;  // kohya's module -> the original layout's, both underscored
  for (const auto& [diffusers, ldm] : ldm_unet_names(names)) {
    const auto underscored = [](std::string s) {
      std::ranges::replace(s, '.', '_');
      return s.substr(0, s.size() - 7);  // without "_weight" / "_bias" (5): only weights are looked up
    };
    if (diffusers.ends_with(".weight")) original[underscored(diffusers)] = underscored(ldm);
  }
  const std::string path = rewritten(dir, "kohya", [&](const std::string& key) {
    if (!key.starts_with("lora_unet_")) return key;
    const std::string module = key.substr(10, key.find('.') - 10);
    return "lora_unet_" + original.at(module) + key.substr(key.find('.'));
  });
  apply_lora({path, 0.7f}, m.unet, &m.text_encoder);
  expect_fused_as_diffusers(std::move(m), "kohya, original names");
}

// diffusers' first LoRAs: attention projections as <attention>.processor.to_q_lora.down.weight (U-Net) and
// <self_attn>.to_q_lora.down.weight (text encoder), the text encoder under "text_model.".
TEST(LoraDerivedFormats, AttentionProcessorKeys) {
  test::TempDir dir;
  Model m;
  const std::string path = rewritten(dir, "peft", [](std::string key) {
    for (const auto& [unet, text, old] : {std::tuple{".to_q.", ".q_proj.", ".to_q_lora."}, std::tuple{".to_k.", ".k_proj.", ".to_k_lora."},
                                          std::tuple{".to_v.", ".v_proj.", ".to_v_lora."}, std::tuple{".to_out.0.", ".out_proj.", ".to_out_lora."}}) {
      const bool in_unet = key.find(unet) != std::string::npos, in_text = key.find(text) != std::string::npos;
      if (!in_unet && !in_text) continue;
      key = replaced(key, in_unet ? unet : text, old);
      if (in_unet) key = replaced(key, old, std::string(".processor") + old);
      key = replaced(replaced(key, "lora_A.weight", "down.weight"), "lora_B.weight", "up.weight");
    }
    return replaced(key, "text_encoder.encoder.", "text_encoder.text_model.encoder.");
  });
  apply_lora({path, 0.7f}, m.unet, &m.text_encoder);
  expect_fused_as_diffusers(std::move(m), "attention-processor keys");
}

// diffusers saves PEFT's lora_alpha in the file's metadata: alpha 8 at rank 4 with lora_B halved is the
// same update; an alpha_pattern entry overrides it for one module.
TEST(LoraDerivedFormats, AlphaFromDiffusersMetadata) {
  test::TempDir dir;
  Model m;
  const std::string quartered = "down_blocks.0.attentions.0.proj_in";
  const json metadata = {{"unet.lora_alpha", 8}, {"unet.r", 4}, {"unet.alpha_pattern", {{quartered, 16}}},
                         {"text_encoder.lora_alpha", 8}, {"text_encoder.use_rslora", false}};
  const std::string path = rewritten(
      dir, "peft", [](const std::string& key) { return key; },
      [&](const std::string& key, std::vector<float>& v) {
        if (!key.ends_with("lora_B.weight")) return;
        const float f = key.find(quartered + ".") != std::string::npos ? 0.25f : 0.5f;
        for (float& x : v) x *= f;
      },
      {{"format", "pt"}, {"lora_adapter_metadata", metadata.dump()}});
  apply_lora({path, 0.7f}, m.unet, &m.text_encoder);
  expect_fused_as_diffusers(std::move(m), "alpha from metadata");
}

// One LoRA tensor (4 x 32 or 32 x 4, random) per key.
std::string lora_file(const test::TempDir& dir, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {}) {
  const std::string path = dir.path("bad.safetensors");
  write_safetensors(path, tensors, metadata);
  return path;
}

TensorToWrite factor(const std::string& name, std::vector<int64_t> shape, test::Rng& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return test::float_tensor(name, DType::F32, std::move(shape), rng.normal_vector(size_t(n), 0.1f));
}

TEST(LoraErrors, NameTheFileAndTheKey) {
  test::TempDir dir;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const std::string proj = "unet.down_blocks.0.attentions.0.proj_in";  // a (32, 32) linear layer
  const std::string file = dir.path("bad.safetensors");
  const auto error = [&](const std::vector<TensorToWrite>& tensors, bool with_text = true,
                         const std::map<std::string, std::string>& metadata = {}) {
    Model m;
    const std::string path = lora_file(dir, tensors, metadata);
    const std::string message = error_of([&] { apply_lora({path, 1.0f}, m.unet, with_text ? &m.text_encoder : nullptr); });
    for (const TensorView& t : m.unet.tensors()) EXPECT_EQ(m.unet.deltas(t.name), nullptr) << "attached by a failed call";
    return message;
  };
  const TensorToWrite down = factor(proj + ".lora_A.weight", {4, 32}, rng), up = factor(proj + ".lora_B.weight", {32, 4}, rng);
  const std::string known = "not a LoRA factor rtvd knows (diffusers/PEFT: unet.<module>.lora_A.weight, lora_B, "
                            "lora.down/up, alpha; kohya: lora_unet_<module>.lora_down.weight, lora_up, alpha; LyCORIS, "
                            "DoRA and bias updates are not supported)";
  EXPECT_EQ(error({down, up, factor(proj + ".lora_magnitude_vector", {32}, rng)}),
            file + ": key '" + proj + ".lora_magnitude_vector': " + known);
  EXPECT_EQ(error({down, up, factor("lora_unet_down_blocks_0_resnets_0_conv1.hada_w1_a", {4, 32}, rng)}),
            file + ": key 'lora_unet_down_blocks_0_resnets_0_conv1.hada_w1_a': " + known);
  EXPECT_EQ(error({factor("unet.down_blocks.7.attentions.0.proj_in.lora_A.weight", {4, 32}, rng)}),
            file + ": key 'unet.down_blocks.7.attentions.0.proj_in.lora_A.weight': the U-Net has no module "
                   "'down_blocks.7.attentions.0.proj_in'");
  EXPECT_EQ(error({factor("lora_unet_down_blocks_0_attentions_0_proj_inn.lora_down.weight", {4, 32}, rng)}),
            file + ": key 'lora_unet_down_blocks_0_attentions_0_proj_inn.lora_down.weight': the U-Net has no module "
                   "'down_blocks_0_attentions_0_proj_inn'");
  EXPECT_EQ(error({down}), file + ": key '" + proj + ".lora_A.weight': the update of 'down_blocks.0.attentions.0.proj_in.weight' has no up factor");
  EXPECT_EQ(error({down, up, factor(proj + ".lora.down.weight", {4, 32}, rng)}),
            file + ": key '" + proj + ".lora.down.weight': a second factor for 'down_blocks.0.attentions.0.proj_in.weight' "
                   "(the first: '" + proj + ".lora_A.weight')");
  EXPECT_EQ(error({down, factor(proj + ".lora_B.weight", {32, 5}, rng)}),
            file + ": '" + proj + ".lora_B.weight' (32, 5) and '" + proj + ".lora_A.weight' (4, 32) do not make an update "
                   "of 'down_blocks.0.attentions.0.proj_in.weight' (32, 32) (expected up (out, rank) and down (rank, in), "
                   "or a conv's (out, rank, 1, 1) and (rank, in, kh, kw))");
  EXPECT_EQ(error({factor("unet.down_blocks.0.resnets.0.conv1.lora_A.weight", {4, 32}, rng),
                   factor("unet.down_blocks.0.resnets.0.conv1.lora_B.weight", {32, 4}, rng)}),
            file + ": 'unet.down_blocks.0.resnets.0.conv1.lora_B.weight' (32, 4, 1, 1) and "
                   "'unet.down_blocks.0.resnets.0.conv1.lora_A.weight' (4, 32, 1, 1) do not make an update of "
                   "'down_blocks.0.resnets.0.conv1.weight' (32, 32, 3, 3) (expected up (out, rank) and down (rank, in), "
                   "or a conv's (out, rank, 1, 1) and (rank, in, kh, kw))");
  EXPECT_EQ(error({down, up, factor(proj + ".alpha", {2}, rng)}),
            file + ": key '" + proj + ".alpha': expected one finite number, got F32 (2)");
  // A file that would change nothing: no tensors at all, or an update of rank 0.
  EXPECT_EQ(error({}), file + ": holds no tensors, expected LoRA factors");
  EXPECT_EQ(error({}, true, {{"format", "pt"}}), file + ": holds no tensors, expected LoRA factors");
  EXPECT_EQ(error({factor(proj + ".lora_A.weight", {0, 32}, rng), factor(proj + ".lora_B.weight", {32, 0}, rng)}),
            file + ": key '" + proj + ".lora_A.weight': shape (0, 32) holds no values (an update of rank 0), expected "
                   "factors of rank 1 or more");
  EXPECT_EQ(error({factor("lora_unet_down_blocks_0_resnets_0_conv1.lora_down.weight", {0, 32, 3, 3}, rng),
                   factor("lora_unet_down_blocks_0_resnets_0_conv1.lora_up.weight", {32, 0, 1, 1}, rng),
                   factor("lora_unet_down_blocks_0_resnets_0_conv1.alpha", {}, rng)}),
            file + ": key 'lora_unet_down_blocks_0_resnets_0_conv1.lora_down.weight': shape (0, 32, 3, 3) holds no "
                   "values (an update of rank 0), expected factors of rank 1 or more");
  EXPECT_EQ(error({factor("text_encoder.encoder.layers.0.mlp.fc1.lora_A.weight", {4, 32}, rng),
                   factor("text_encoder.encoder.layers.0.mlp.fc1.lora_B.weight", {128, 4}, rng)}, false),
            file + ": key 'text_encoder.encoder.layers.0.mlp.fc1.lora_A.weight': an update of the text encoder, but the "
                   "model has none");
  EXPECT_EQ(error({down, up}, true, {{"lora_adapter_metadata", R"({"unet.use_dora": true})"}}),
            file + " metadata lora_adapter_metadata: 'unet.use_dora' is true: rtvd merges plain LoRA updates only");

  // A later update that fails leaves the earlier ones unattached too (checked by error()).
  EXPECT_NE(error({down, up, factor("unet.up_blocks.1.resnets.0.conv1.lora_A.weight", {4, 96, 3, 3}, rng),
                   factor("unet.up_blocks.1.resnets.0.conv1.lora_B.weight", {32, 3, 1, 1}, rng)}),
            "");

  for (const char* name : {"pytorch_lora_weights.bin", "lcm.pt"}) {
    const std::string path = dir.path(name);
    std::ofstream(path) << "not read";
    Model m;
    EXPECT_EQ(error_of([&] { apply_lora({path, 1.0f}, m.unet, &m.text_encoder); }),
              path + ": a pickle LoRA, which rtvd never unpickles (loading one can run code from the file): convert it "
                     "to .safetensors where you trust it, e.g. with torch.load(..., weights_only=True) and "
                     "safetensors.torch.save_file, or diffusers' scripts/convert_original_stable_diffusion_to_diffusers.py");
  }
}

TEST(LoraSpec, FileAndScale) {
  test::TempDir dir;
  EXPECT_EQ(parse_lora_spec("lcm.safetensors").path, "lcm.safetensors");
  EXPECT_EQ(parse_lora_spec("lcm.safetensors").scale, 1.0f);
  EXPECT_EQ(parse_lora_spec("dir/lcm.safetensors:0.8").path, "dir/lcm.safetensors");
  EXPECT_EQ(parse_lora_spec("dir/lcm.safetensors:0.8").scale, 0.8f);
  EXPECT_EQ(parse_lora_spec("a.safetensors:-1.5").scale, -1.5f);
  const std::string colon = dir.path("style:2");  // an existing file is taken whole
  std::ofstream(colon) << "x";
  EXPECT_EQ(parse_lora_spec(colon).path, colon);
  EXPECT_EQ(parse_lora_spec(colon).scale, 1.0f);
  for (const char* bad : {"a.safetensors:x", "a.safetensors:", ":0.5", "a.safetensors:0.5x", "a.safetensors:nan", "a.safetensors:inf"})
    EXPECT_EQ(error_of([&] { parse_lora_spec(bad); }),
              cat("--lora ", bad, ": expected FILE or FILE:SCALE with SCALE a number, such as lcm.safetensors:0.8"));
  EXPECT_EQ(error_of([] { parse_lora_spec(""); }), "--lora: expected FILE or FILE:SCALE, got an empty value");
}

}  // namespace
}  // namespace rtvd
