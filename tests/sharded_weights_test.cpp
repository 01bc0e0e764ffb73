// Sharded weights in a diffusers folder (pipeline/model_files/sharded_weights.h): tests/data/tiny_sd with each
// component's weights split into shards and an index, named and laid out as diffusers' and transformers'
// save_pretrained(max_shard_size=...) write them (huggingface_hub's split_torch_state_dict_into_shards: the
// tensors in order, a new shard where the next tensor would pass the size; {"metadata": {"total_size"},
// "weight_map"} with sorted keys), renders the frames the single files render, bit for bit on the CPU; each
// disagreement between the index, the shards and the folder is one line naming the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/engine.h"
#include "pipeline/models/model.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

// A component folder of tiny_sd and the stem of its weights' names (diffusers' and transformers').
struct Component {
  std::string folder, stem;
};
const Component kUNet{"unet", "diffusion_pytorch_model"}, kVae{"vae", "diffusion_pytorch_model"},
    kTextEncoder{"text_encoder", "model"};

// "00002": huggingface_hub's shard numbers.
std::string five_digits(size_t i) {
  char s[16];
  std::snprintf(s, sizeof s, "%05zu", i);
  return s;
}

TensorToWrite copy_of(const TensorView& t) { return {t.name, t.dtype, t.shape, {t.data, t.data + t.bytes}}; }

// The tensors of a file, to write again changed.
std::vector<TensorToWrite> tensors_of(const std::string& path) {
  const SafeTensorsFile file = SafeTensorsFile::open(path);
  std::vector<TensorToWrite> tensors;
  for (const TensorView& t : file.tensors()) tensors.push_back(copy_of(t));
  return tensors;
}

// A shard written again with other tensors (as save_pretrained writes one: metadata {"format": "pt"}).
void rewrite_shard(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  write_safetensors(path + ".new", tensors, {{"format", "pt"}});
  fs::rename(path + ".new", path);
}

// tiny_sd copied with every component's weights in shards of at most max_shard_bytes (2 or 3 per component at
// the sizes used here) and their index, the single files removed; variant "fp16" names them as
// save_pretrained(variant="fp16") does.
class ShardedTinySd {
 public:
  explicit ShardedTinySd(const std::string& variant = "", uint64_t max_shard_bytes = 700'000) : variant_(variant) {
    fs::copy(test::test_data("tiny_sd"), dir, fs::copy_options::recursive);
    for (const Component& c : {kUNet, kVae, kTextEncoder}) shard(c, max_shard_bytes);
  }

  test::TempDir tmp{"rtvd_sharded"};
  const std::string dir = tmp.path("tiny_sd");

  std::string index(const Component& c) const {
    return cat(dir, "/", c.folder, "/", c.stem, ".safetensors.index", variant_.empty() ? "" : "." + variant_, ".json");
  }
  // The shards' file names, in order.
  const std::vector<std::string>& shards(const Component& c) const { return shards_.at(c.folder); }
  std::string shard_path(const Component& c, size_t i) const { return cat(dir, "/", c.folder, "/", shards(c).at(i)); }

  // Rewrites a component's index after change (the weight_map as read).
  void edit_index(const Component& c, const std::function<void(json&)>& change) const {
    json j = json::parse(std::ifstream(index(c)));
    change(j);
    std::ofstream(index(c)) << j.dump(2) << "\n";
  }

 private:
  std::string variant_;
  std::map<std::string, std::vector<std::string>> shards_;

  void shard(const Component& c, uint64_t max_shard_bytes) {
    const std::string single = cat(dir, "/", c.folder, "/", c.stem, ".safetensors");
    std::vector<std::vector<TensorToWrite>> groups(1);
    uint64_t in_group = 0, total = 0;
    {
      const SafeTensorsFile file = SafeTensorsFile::open(single);
      for (const TensorView& t : file.tensors()) {
        if (in_group > 0 && in_group + t.bytes > max_shard_bytes) groups.emplace_back(), in_group = 0;
        groups.back().push_back(copy_of(t));
        in_group += t.bytes;
        total += t.bytes;
      }
    }
    fs::remove(single);
    json weight_map = json::object();
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::string name = cat(c.stem, variant_.empty() ? "" : "." + variant_, "-", five_digits(i + 1), "-of-",
                                   five_digits(groups.size()), ".safetensors");
      write_safetensors(cat(dir, "/", c.folder, "/", name), groups[i], {{"format", "pt"}});
      for (const TensorToWrite& t : groups[i]) weight_map[t.name] = name;
      shards_[c.folder].push_back(name);
    }
    std::ofstream(index(c)) << json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) << "\n";
  }
};

// Two frames of the prompt "a watercolor fox" (text encoder, U-Net with guidance, VAE decode), on the CPU.
std::vector<std::vector<uint8_t>> frames(const std::string& model) {
  EngineOptions o;
  o.model.path = model;
  o.device = DeviceKind::Cpu;
  o.threads = 2;
  Engine e(o);
  PromptSettings p;
  p.prompt = "a watercolor fox";
  e.set_prompts(p);
  FrameSettings s;
  s.steps = 2;
  e.configure(s, false);
  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < 2; ++i) out.push_back(e.render(nullptr).pixels);
  return out;
}

class ShardedFolder : public testing::TestWithParam<const char*> {};

TEST_P(ShardedFolder, RendersTheFramesOfTheSingleFiles) {
  const ShardedTinySd sharded(GetParam());
  for (const Component& c : {kUNet, kVae, kTextEncoder}) {
    ASSERT_GE(sharded.shards(c).size(), 2u) << c.folder;
    ASSERT_LE(sharded.shards(c).size(), 3u) << c.folder;
  }
  const Model m = load_model({.path = sharded.dir});
  ASSERT_TRUE(m.text_encoder.has_value());
  EXPECT_EQ(m.text_encoder->tensors.label(), sharded.index(kTextEncoder));
  ASSERT_FALSE(m.components.empty());
  EXPECT_EQ(m.components[0].source, sharded.index(kUNet));
  EXPECT_EQ(m.weights->checkpoint_parameters(), load_model({.path = test::test_data("tiny_sd")}).weights->checkpoint_parameters());

  const auto expected = frames(test::test_data("tiny_sd"));
  ASSERT_NE(expected[0], expected[1]) << "the noise walk should move between frames";
  EXPECT_EQ(frames(sharded.dir), expected);
}

INSTANTIATE_TEST_SUITE_P(Variants, ShardedFolder, testing::Values("", "fp16"),
                         [](const testing::TestParamInfo<const char*>& i) { return *i.param ? "fp16" : "plain"; });

// The indexes that diffusers' and transformers' own save_pretrained(max_shard_size="1MB") wrote for tiny_sd's
// weights (tests/data/sharded_tiny_sd/, tools/reference/export_tiny_sd_sharded.py): their names, their
// variant's place in the name and their split (a tensor over the size alone in a shard) are diffusers', and the
// shards are written as they say. The folder renders tiny_sd's frames. (The shards that diffusers wrote
// themselves rendered the same bytes through rtvd on the GPU machine, where diffusers runs.)
class ShardedByDiffusers : public testing::TestWithParam<const char*> {};

TEST_P(ShardedByDiffusers, RendersTheFramesOfTheSingleFiles) {
  const std::string variant = GetParam();
  test::TempDir tmp{"rtvd_sharded_by_diffusers"};
  const std::string dir = tmp.path("tiny_sd");
  fs::copy(test::test_data("tiny_sd"), dir, fs::copy_options::recursive);
  for (const Component& c : {kUNet, kVae, kTextEncoder}) {
    const std::string index_name = cat(c.stem, ".safetensors.index", variant == "fp16" ? ".fp16" : "", ".json");
    const std::string index = test::test_data(cat("sharded_tiny_sd/", variant, "/", c.folder, "/", index_name));
    const json weight_map = json::parse(std::ifstream(index)).at("weight_map");
    const std::string single = cat(dir, "/", c.folder, "/", c.stem, ".safetensors");
    std::map<std::string, std::vector<TensorToWrite>> shards;
    size_t tensors = 0;
    for (TensorToWrite& t : tensors_of(single)) {
      ASSERT_TRUE(weight_map.contains(t.name)) << index << " does not list " << t.name;
      shards[weight_map.at(t.name).get<std::string>()].push_back(std::move(t));
      ++tensors;
    }
    ASSERT_EQ(weight_map.size(), tensors) << index << " lists tensors that " << single << " does not have";
    ASSERT_GE(shards.size(), 2u) << index;
    fs::remove(single);
    for (const auto& [name, tensors] : shards) write_safetensors(cat(dir, "/", c.folder, "/", name), tensors, {{"format", "pt"}});
    fs::copy_file(index, cat(dir, "/", c.folder, "/", index_name));
  }
  EXPECT_EQ(load_model({.path = dir}).components[0].source,
            cat(dir, "/unet/diffusion_pytorch_model.safetensors.index", variant == "fp16" ? ".fp16" : "", ".json"));
  EXPECT_EQ(frames(dir), frames(test::test_data("tiny_sd")));
}

INSTANTIATE_TEST_SUITE_P(Variants, ShardedByDiffusers, testing::Values("plain", "fp16"),
                         [](const testing::TestParamInfo<const char*>& i) { return i.param; });

// As diffusers loads it: the index of the shards before the single file of the same variant, and either before
// the fp16 variant's.
TEST(ShardedWeights, TheIndexComesFirstAsInDiffusers) {
  const ShardedTinySd sharded;
  for (const char* name : {"diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.fp16.safetensors"})
    fs::copy_file(test::test_data("tiny_sd/unet/diffusion_pytorch_model.safetensors"), sharded.dir + "/unet/" + name);
  EXPECT_EQ(load_model({.path = sharded.dir}).components[0].source, sharded.index(kUNet));
  fs::remove(sharded.index(kUNet));
  EXPECT_EQ(load_model({.path = sharded.dir}).components[0].source, sharded.dir + "/unet/diffusion_pytorch_model.safetensors");
}

TEST(ShardedWeights, AListedShardMissing) {
  const ShardedTinySd sharded;
  fs::remove(sharded.shard_path(kUNet, 1));
  EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
            sharded.shard_path(kUNet, 1) + ": missing (a shard that the index diffusion_pytorch_model.safetensors.index.json lists)");
}

TEST(ShardedWeights, AShardTheIndexDoesNotList) {
  const ShardedTinySd sharded;
  const std::string extra = sharded.dir + "/vae/diffusion_pytorch_model-00004-of-00004.safetensors";
  fs::copy_file(sharded.shard_path(kVae, 0), extra);
  EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
            extra + ": a shard that the index diffusion_pytorch_model.safetensors.index.json does not list");
}

TEST(ShardedWeights, ATensorInTwoShards) {
  const ShardedTinySd sharded;
  // The first shard's first tensor written into the second shard as well.
  std::vector<TensorToWrite> tensors = tensors_of(sharded.shard_path(kTextEncoder, 1));
  tensors.push_back(tensors_of(sharded.shard_path(kTextEncoder, 0)).front());
  const std::string twice = tensors.back().name;
  rewrite_shard(sharded.shard_path(kTextEncoder, 1), tensors);
  EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
            cat(sharded.shard_path(kTextEncoder, 1), ": tensor '", twice, "' is also in ",
                sharded.shards(kTextEncoder).at(0), " (expected each tensor in one shard)"));
}

TEST(ShardedWeights, TheIndexAndTheShardsDisagreeOnATensor) {
  const ShardedTinySd sharded;
  const std::string index = sharded.index(kUNet), first = sharded.shards(kUNet).at(0),
                    second = sharded.shards(kUNet).at(1);
  const std::string moved = SafeTensorsFile::open(sharded.shard_path(kUNet, 0)).tensors().front().name;

  // A tensor the index gives to a shard that does not hold it.
  sharded.edit_index(kUNet, [&](json& j) { j["weight_map"]["conv_in.extra"] = first; });
  EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
            cat(index, ": tensor 'conv_in.extra' is mapped to ", first, ", which does not hold it"));

  // A tensor of a shard that the index does not name.
  sharded.edit_index(kUNet, [&](json& j) { j["weight_map"].erase("conv_in.extra"), j["weight_map"].erase(moved); });
  EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
            cat(sharded.shard_path(kUNet, 0), ": tensor '", moved, "' is not in the weight_map of ",
                "diffusion_pytorch_model.safetensors.index.json"));

  // A tensor the index gives to another shard.
  sharded.edit_index(kUNet, [&](json& j) { j["weight_map"][moved] = second; });
  EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
            cat(sharded.shard_path(kUNet, 0), ": tensor '", moved, "': the index diffusion_pytorch_model.safetensors.index.json "
                "maps it to ", second));
}

TEST(ShardedWeights, TheIndexNamesOnlyFilesOfItsFolder) {
  const ShardedTinySd sharded;
  const std::string index = sharded.index(kUNet);
  // Each would be a shard of the right content: the name alone is refused. {name, as the error prints it}
  const std::string outside = sharded.tmp.path("outside.safetensors");
  fs::copy_file(sharded.shard_path(kUNet, 0), outside);
  fs::create_directory(sharded.dir + "/unet/sub");
  fs::copy_file(sharded.shard_path(kUNet, 0), sharded.dir + "/unet/sub/x.safetensors");
  const json original = json::parse(std::ifstream(index));
  for (const auto& [name, printed] : std::vector<std::pair<std::string, std::string>>{
           {"../outside.safetensors", "../outside.safetensors"},
           {outside, outside},
           {"sub/x.safetensors", "sub/x.safetensors"},
           {"..\\outside.safetensors", "..\\\\outside.safetensors"},
           {"\x1b[31mx.safetensors", "\\u001b[31mx.safetensors"},
           {"config.json", "config.json"},
           {"", ""}}) {
    std::string moved;
    sharded.edit_index(kUNet, [&, name = name](json& j) {
      moved = j["weight_map"].begin().key();
      j["weight_map"][moved] = name;
    });
    EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
              cat(index, ": key 'weight_map': tensor '", moved, "': expected the name of a .safetensors file in this "
                  "folder, got '", printed, "'"));
    std::ofstream(index) << original.dump(2);
  }
  sharded.edit_index(kUNet, [](json& j) { j["weight_map"] = json::object(); });
  EXPECT_EQ(error_of([&] { load_model({.path = sharded.dir}); }),
            index + ": key 'weight_map': expected an object of tensor names and their shards' file names, got object {}");
}

// What the single file's path checks holds per shard, each error naming the shard: the header's offsets, and
// finite weights.
TEST(ShardedWeights, EachShardIsCheckedAsASingleFileIs) {
  {
    const ShardedTinySd sharded;
    const std::string shard = sharded.shard_path(kVae, 1);
    fs::resize_file(shard, fs::file_size(shard) - 2);
    const std::string e = error_of([&] { load_model({.path = sharded.dir}); });
    EXPECT_TRUE(e.starts_with(shard + ": ")) << e;
    EXPECT_NE(e.find("data section"), std::string::npos) << e;
  }
  {
    const ShardedTinySd sharded;
    const std::string shard = sharded.shard_path(kUNet, 1);
    std::vector<TensorToWrite> tensors = tensors_of(shard);
    TensorToWrite& bad = tensors.back();
    ASSERT_EQ(bad.dtype, DType::F16);
    bad.bytes[2] = 0x00, bad.bytes[3] = 0x7c;  // element 1: +Inf
    rewrite_shard(shard, tensors);
    const std::string e = error_of([&] { load_model({.path = sharded.dir}).weights->check_finite(); });
    EXPECT_EQ(e, cat(shard, ": tensor '", bad.name, "' holds +Inf at element 1 of ", shape_string(bad.shape),
                     ", expected finite weights"));
  }
}

TEST(ShardedWeights, PickledShardsAreRefusedByName) {
  const ShardedTinySd sharded;
  for (const std::string& name : {std::string("diffusion_pytorch_model.safetensors.index.json"),
                                  sharded.shards(kUNet)[0], sharded.shards(kUNet)[1]})
    fs::remove(sharded.dir + "/unet/" + name);
  std::ofstream(sharded.dir + "/unet/diffusion_pytorch_model.bin.index.json") << "{}";
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      sharded.dir + "/unet/diffusion_pytorch_model.bin.index.json: the U-Net's weights are a pickle, "
                      "which rtvd never unpickles",
                      error_of([&] { load_model({.path = sharded.dir}); }));
}

}  // namespace
}  // namespace rtvd
