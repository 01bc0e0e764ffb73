// config.json parsing: a full config lands in the struct, defaults fill the optional keys, and every class
// of mistake fails with "<label>: key '<key>': expected ..., got ...".
#include "pipeline/model_files/model_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <tuple>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;
using test::error_of;
using testing::IsSubstring;

// The smallest valid config: the required keys only.
json minimal_config() {
  return json::parse(R"({
    "name": "tiny", "dtype": "float32", "sample_size": 32, "in_channels": 3, "out_channels": 3,
    "block_out_channels": [32, 64, 64], "layers_per_block": 1, "norm": "batch", "norm_num_groups": 32,
    "attention_levels": [false, true, true], "attention_head_dim": 32
  })");
}

// The error of the minimal config after edit, which is expected to break it.
std::string error_after(const std::function<void(json&)>& edit) {
  json config = minimal_config();
  edit(config);
  return error_of([&] { parse_model_config(config.dump(), "config.json"); });
}

TEST(ModelConfig, FullConfigLandsInTheStruct) {
  const ModelConfig c = parse_model_config(R"({
    "name": "sd-like", "dtype": "float16", "sample_size": 64, "in_channels": 4, "out_channels": 4,
    "block_out_channels": [320, 640, 1280, 1280], "layers_per_block": 2, "norm": "group",
    "norm_num_groups": 32, "norm_eps": 1e-6, "attention_levels": [true, true, true, false],
    "mid_attention": false, "num_attention_heads": 8, "transformer_layers_per_block": 2,
    "cross_attention_dim": 768, "context_length": 77, "use_linear_projection": false,
    "num_class_embeds": 3, "class_names": ["cat", "dog"], "flip_sin_to_cos": false,
    "freq_shift": 1, "timestep_scale": 999.5
  })",
                                           "sd.json");
  EXPECT_EQ(c.name, "sd-like");
  EXPECT_EQ(c.dtype, DType::F16);
  EXPECT_EQ(c.sample_size, 64);
  EXPECT_EQ(c.in_channels, 4);
  EXPECT_EQ(c.out_channels, 4);
  EXPECT_EQ(c.block_out_channels, (std::vector<int>{320, 640, 1280, 1280}));
  EXPECT_EQ(c.layers_per_block, 2);
  EXPECT_EQ(c.norm, NormKind::Group);
  EXPECT_EQ(c.norm_num_groups, 32);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.attention_levels, (std::vector<bool>{true, true, true, false}));
  EXPECT_FALSE(c.mid_attention);
  EXPECT_EQ(c.attention_head_dim, 0);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.heads_for(640), 8);
  EXPECT_EQ(c.transformer_layers_per_block, (std::vector<int>{2, 2, 2, 2}));  // one per level
  EXPECT_EQ(c.cross_attention_dim, 768);
  EXPECT_EQ(c.context_length, 77);
  EXPECT_FALSE(c.use_linear_projection);
  EXPECT_EQ(c.num_class_embeds, 3);
  EXPECT_EQ(c.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_FALSE(c.flip_sin_to_cos);
  EXPECT_FLOAT_EQ(c.freq_shift, 1.0f);
  EXPECT_FLOAT_EQ(c.timestep_scale, 999.5f);
  EXPECT_EQ(c.size_multiple(), 8);
}

TEST(ModelConfig, OptionalKeysTakeTheStructDefaults) {
  const ModelConfig c = parse_model_config(minimal_config().dump(), "config.json");
  const ModelConfig defaults;
  EXPECT_EQ(c.dtype, DType::F32);
  EXPECT_EQ(c.norm, NormKind::Batch);
  EXPECT_EQ(c.attention_head_dim, 32);
  EXPECT_EQ(c.num_attention_heads, 0);
  EXPECT_EQ(c.heads_for(64), 2);
  EXPECT_EQ(c.norm_eps, defaults.norm_eps);
  EXPECT_EQ(c.mid_attention, defaults.mid_attention);
  EXPECT_EQ(c.transformer_layers_per_block, std::vector<int>(c.levels(), 1));
  EXPECT_EQ(c.cross_attention_dim, 0);
  EXPECT_EQ(c.context_length, 0);
  EXPECT_EQ(c.use_linear_projection, defaults.use_linear_projection);
  EXPECT_EQ(c.num_class_embeds, 0);
  EXPECT_TRUE(c.class_names.empty());
  EXPECT_EQ(c.flip_sin_to_cos, defaults.flip_sin_to_cos);
  EXPECT_EQ(c.freq_shift, defaults.freq_shift);
  EXPECT_EQ(c.timestep_scale, defaults.timestep_scale);
}

TEST(ModelConfig, ClassAndCrossAttentionConditioningMayBeCombined) {
  json config = minimal_config();
  config["num_class_embeds"] = 11;
  config["cross_attention_dim"] = 64;
  config["context_length"] = 8;
  const ModelConfig c = parse_model_config(config.dump(), "config.json");
  EXPECT_EQ(c.num_class_embeds, 11);
  EXPECT_EQ(c.null_class(), 10);
  EXPECT_EQ(c.cross_attention_dim, 64);
}

TEST(ModelConfig, MissingRequiredKey) {
  for (const char* key : {"name", "dtype", "sample_size", "in_channels", "out_channels", "block_out_channels",
                          "layers_per_block", "norm", "norm_num_groups", "attention_levels"}) {
    SCOPED_TRACE(key);
    EXPECT_PRED_FORMAT2(IsSubstring, cat("config.json: key '", key, "': expected "),
                        error_after([&](json& c) { c.erase(key); }));
    EXPECT_PRED_FORMAT2(IsSubstring, "got nothing (the key is required)",
                        error_after([&](json& c) { c.erase(key); }));
  }
}

TEST(ModelConfig, UnknownKeyIsATypoNotAnOption) {
  EXPECT_PRED_FORMAT2(IsSubstring, "config.json: key 'norm_num_group': expected one of the known keys (name, ",
                      error_after([](json& c) { c["norm_num_group"] = 32; }));
  EXPECT_PRED_FORMAT2(IsSubstring, "got an unknown key", error_after([](json& c) { c["Name"] = "x"; }));
}

// JSON parsers keep the last of repeated keys; a config that says two things must not pass silently.
TEST(ModelConfig, RepeatedKey) {
  std::string text = minimal_config().dump();
  text.insert(text.size() - 1, R"(,"sample_size": 64)");
  EXPECT_EQ(error_of([&] { parse_model_config(text, "config.json"); }), "config.json: key 'sample_size' appears twice");
}

TEST(ModelConfig, WrongType) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"name", 3},
      {"sample_size", "64"},
      {"sample_size", 64.0},
      {"block_out_channels", 32},
      {"attention_levels", json::array({0, 1, 1})},
      {"mid_attention", "yes"},
      {"norm_eps", "1e-5"},
      {"timestep_scale", json::array()},
      {"class_names", json::array({1, 2})},
  };
  for (const auto& [key, value] : cases) {
    SCOPED_TRACE(cat(key, " = ", value.dump()));
    const std::string message = error_after([&](json& c) { c[key] = value; });
    EXPECT_PRED_FORMAT2(IsSubstring, cat("config.json: key '", key, "': expected "), message);
    EXPECT_PRED_FORMAT2(IsSubstring, cat(", got ", value.type_name(), " ", value.dump()), message);
  }
  // In an integer array, the error shows the element that is wrong.
  EXPECT_PRED_FORMAT2(IsSubstring, R"(config.json: key 'block_out_channels': expected an integer, got string "64")",
                      error_after([](json& c) { c["block_out_channels"] = json::array({32, "64", 64}); }));
}

// null is a type and a value of one word: it was printed as both ("got null null").
TEST(ModelConfig, NullValueIsNamedOnce) {
  for (const char* key : {"name", "sample_size", "block_out_channels", "mid_attention", "norm_eps"}) {
    SCOPED_TRACE(key);
    const std::string message = error_after([&](json& c) { c[key] = nullptr; });
    EXPECT_PRED_FORMAT2(IsSubstring, cat("config.json: key '", key, "': expected "), message);
    EXPECT_TRUE(message.ends_with(", got null") && !message.ends_with("null null")) << message;
  }
}

// nlohmann took the NUL for the end of the text and ignored what followed.
TEST(ModelConfig, BytesAfterTheJson) {
  const std::string text = minimal_config().dump();
  EXPECT_EQ(error_of([&] { parse_model_config(text + std::string("\0{\"sample_size\":8}", 18), "config.json"); }),
            cat("config.json: not valid JSON: a NUL byte at byte ", text.size()));
}

TEST(ModelConfig, IntegerOutside32Bits) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'in_channels': expected an integer in [1, 256], got number 4294967299",
                      error_after([](json& c) { c["in_channels"] = 4294967299ull; }));
}

// Sizes past what the architecture holds: layers_per_block 2147483647 grew the graph to 8 GB over 300 s, and
// channels of 1e9 overflowed int into negative shapes. Each is refused at parse time, with its bound.
TEST(ModelConfig, SizesHaveUpperBounds) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int64_t huge = rng.integer(0, 1) ? 2147483647 : int64_t(rng.integer(1, 1000)) * 1'000'000'000;
  // (key, its range, how to set it)
  const std::vector<std::tuple<const char*, int, int, std::function<void(json&, int64_t)>>> cases = {
      {"sample_size", 1, 4096, [](json& c, int64_t v) { c["sample_size"] = v; }},
      {"in_channels", 1, 256, [](json& c, int64_t v) { c["in_channels"] = v; }},
      {"out_channels", 1, 256, [](json& c, int64_t v) { c["out_channels"] = v; }},
      {"block_out_channels", 1, 8192, [](json& c, int64_t v) { c["block_out_channels"] = {32, v, 64}; }},
      {"layers_per_block", 1, 8, [](json& c, int64_t v) { c["layers_per_block"] = v; }},
      {"norm_num_groups", 1, 8192, [](json& c, int64_t v) { c["norm_num_groups"] = v; }},
      {"attention_head_dim", 1, 8192, [](json& c, int64_t v) { c["attention_head_dim"] = v; }},
      {"transformer_layers_per_block", 1, 16, [](json& c, int64_t v) { c["transformer_layers_per_block"] = v; }},
      {"cross_attention_dim", 0, 8192, [](json& c, int64_t v) { c["cross_attention_dim"] = v; }},
      {"context_length", 0, 4096, [](json& c, int64_t v) { c["context_length"] = v; }},
      {"num_class_embeds", 0, 65536, [](json& c, int64_t v) { c["num_class_embeds"] = v; }},
  };
  for (const auto& [key, min, max, edit] : cases) {
    for (const int64_t value : {int64_t(max) + 1, huge}) {
      SCOPED_TRACE(cat(key, " = ", value));
      const auto start = std::chrono::steady_clock::now();
      const std::string message = error_after([&](json& c) { edit(c, value); });
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
      EXPECT_PRED_FORMAT2(IsSubstring,
                          cat("config.json: key '", key, "': expected an integer in [", min, ", ", max, "], got number ", value),
                          message);
    }
  }
  EXPECT_PRED_FORMAT2(IsSubstring, "config.json: key 'block_out_channels': expected an array of 1 to 8 integers, got",
                      error_after([](json& c) {
                        c["block_out_channels"] = std::vector<int>(9, 64);
                        c["attention_levels"] = std::vector<bool>(9, false);
                      }));
}

// Each key within its bound, but together a U-Net whose graph would take long to build and plan.
TEST(ModelConfig, BlockCountHasAnUpperBound) {
  const std::string message = error_after([](json& c) {
    c["block_out_channels"] = std::vector<int>(8, 64);
    c["attention_levels"] = std::vector<bool>(8, true);
    c["sample_size"] = 128;
    c["layers_per_block"] = 8;
    c["transformer_layers_per_block"] = 16;
  });
  EXPECT_PRED_FORMAT2(IsSubstring, "config.json: the U-Net has 138 ResNets and 2192 transformer blocks, expected at most 256",
                      message);
  // SD 2.1 and SD 1.5 are far inside it.
  for (const std::string& name : builtin_config_names()) EXPECT_NO_THROW(builtin_model_config(name)) << name;
}

// ~70,000 nested '[' crashed rtvd: the error dump()ed the value recursively.
TEST(ModelConfig, DeepNestingIsRefused) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const size_t depth = size_t(rng.integer(70'000, 200'000));
  std::string text = minimal_config().dump();
  text.insert(text.size() - 1, R"(,"class_names":)" + std::string(depth, '[') + std::string(depth, ']'));
  const std::string message = error_of([&] { parse_model_config(text, "config.json"); });
  EXPECT_PRED_FORMAT2(IsSubstring, "config.json: JSON nested deeper than 64 levels (at byte ", message);
  // Within the limit, the error quotes a short excerpt of the value.
  text = minimal_config().dump();
  text.insert(text.size() - 1, R"(,"class_names":)" + std::string(63, '[') + std::string(63, ']'));
  const std::string shallow = error_of([&] { parse_model_config(text, "config.json"); });
  EXPECT_PRED_FORMAT2(IsSubstring, "config.json: key 'class_names': expected an array of strings, got array [[[[", shallow);
  EXPECT_LT(shallow.size(), 200u) << shallow;
}

// A config file of any size is read only up to the bound.
TEST(ModelConfig, LargeFileIsRefusedWithoutReadingItAll) {
  const std::string path = cat(testing::TempDir(), "rtvd_model_config_large_", getpid(), ".json");
  {
    std::ofstream out(path);
    out << minimal_config().dump();
  }
  ASSERT_EQ(::truncate(path.c_str(), off_t(uint64_t(8) << 30)), 0);  // sparse: 8 GB that cost no disk
  const auto start = std::chrono::steady_clock::now();
  EXPECT_PRED_FORMAT2(IsSubstring, cat(path, ": "), error_of([&] { load_model_config(path); }));
  EXPECT_PRED_FORMAT2(IsSubstring, "bytes, expected a config of at most 4194304 bytes",
                      error_of([&] { load_model_config(path); }));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  std::remove(path.c_str());
}

TEST(ModelConfig, NonPositiveSize) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"sample_size", 0},        {"in_channels", -1},          {"out_channels", 0},
      {"layers_per_block", 0},   {"norm_num_groups", 0},       {"attention_head_dim", -32},
      {"block_out_channels", json::array({32, 0, 64})},        {"transformer_layers_per_block", 0},
  };
  for (const auto& [key, value] : cases) {
    SCOPED_TRACE(key);
    EXPECT_PRED_FORMAT2(IsSubstring, cat("config.json: key '", key, "': expected an integer in [1, "),
                        error_after([&](json& c) { c[key] = value; }));
  }
  for (const char* key : {"cross_attention_dim", "context_length", "num_class_embeds"}) {
    SCOPED_TRACE(key);
    EXPECT_PRED_FORMAT2(IsSubstring,
                        cat("config.json: key '", key, "': expected an integer in [0, "),
                        error_after([&](json& c) { c[key] = -1; }));
  }
  for (const char* key : {"norm_eps", "timestep_scale"}) {
    SCOPED_TRACE(key);
    EXPECT_PRED_FORMAT2(IsSubstring, cat("config.json: key '", key, "': expected a positive number, got number 0"),
                        error_after([&](json& c) { c[key] = 0; }));
  }
}

TEST(ModelConfig, NoLevels) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'block_out_channels': expected an array of 1 to 8 integers, got array []",
                      error_after([](json& c) { c["block_out_channels"] = json::array(); }));
}

TEST(ModelConfig, AttentionLevelsDoNotMatchTheLevels) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'attention_levels': expected 3 entries (one per block_out_channels level), "
                      "got 2",
                      error_after([](json& c) { c["attention_levels"] = {true, true}; }));
}

TEST(ModelConfig, ChannelsNotDivisibleByNormGroups) {
  // Group ResNets normalise every level.
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'norm_num_groups': expected a divisor of block_out_channels[0] = 48, got 32",
                      error_after([](json& c) {
                        c["norm"] = "group";
                        c["block_out_channels"] = {48, 64, 64};
                      }));
  // Batch ResNets need groups only where a transformer's GroupNorm runs: level 0 has none, level 1 has.
  json batch = minimal_config();
  batch["block_out_channels"] = {48, 64, 64};
  EXPECT_NO_THROW(parse_model_config(batch.dump(), "config.json"));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'norm_num_groups': expected a divisor of block_out_channels[1] = 96, got 64",
                      error_after([](json& c) {
                        c["norm_num_groups"] = 64;
                        c["block_out_channels"] = {64, 96, 128};
                        c["attention_head_dim"] = 16;
                      }));
}

TEST(ModelConfig, ChannelsNotDivisibleIntoHeads) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'attention_head_dim': expected a divisor of block_out_channels[1] = 64 (an "
                      "attention level), got 24",
                      error_after([](json& c) { c["attention_head_dim"] = 24; }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'num_attention_heads': expected a divisor of block_out_channels[1] = 64 (an "
                      "attention level), got 3",
                      error_after([](json& c) {
                        c.erase("attention_head_dim");
                        c["num_attention_heads"] = 3;
                      }));
  // The mid block attends at the last level even where attention_levels says no.
  EXPECT_PRED_FORMAT2(IsSubstring, "expected a divisor of block_out_channels[2] = 96 (an attention level), got 64",
                      error_after([](json& c) {
                        c["block_out_channels"] = {64, 64, 96};
                        c["attention_levels"] = {true, true, false};
                        c["attention_head_dim"] = 64;
                      }));
}

TEST(ModelConfig, NotExactlyOneWayToSizeHeads) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'attention_head_dim': expected exactly one of attention_head_dim and "
                      "num_attention_heads, got neither",
                      error_after([](json& c) { c.erase("attention_head_dim"); }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'num_attention_heads': expected exactly one of attention_head_dim and "
                      "num_attention_heads, got both",
                      error_after([](json& c) { c["num_attention_heads"] = 2; }));
}

TEST(ModelConfig, UnsupportedDType) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      R"(config.json: key 'dtype': expected "float16" or "float32", got string "bfloat16")",
                      error_after([](json& c) { c["dtype"] = "bfloat16"; }));
}

TEST(ModelConfig, UnsupportedNorm) {
  EXPECT_PRED_FORMAT2(IsSubstring, R"(config.json: key 'norm': expected "batch" or "group", got string "layer")",
                      error_after([](json& c) { c["norm"] = "layer"; }));
}

TEST(ModelConfig, CrossAttentionWithoutContextLength) {
  const std::string expected =
      "config.json: key 'context_length': expected a positive integer with cross_attention_dim 64, got 0 or nothing";
  EXPECT_PRED_FORMAT2(IsSubstring, expected, error_after([](json& c) { c["cross_attention_dim"] = 64; }));
  EXPECT_PRED_FORMAT2(IsSubstring, expected, error_after([](json& c) {
                        c["cross_attention_dim"] = 64;
                        c["context_length"] = 0;
                      }));
}

TEST(ModelConfig, ClassNamesDoNotMatchTheClassCount) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'class_names': expected 3 names (num_class_embeds - 1), got 2 names",
                      error_after([](json& c) {
                        c["num_class_embeds"] = 4;
                        c["class_names"] = {"cat", "dog"};
                      }));
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'class_names': expected no names without num_class_embeds, got 1 names",
                      error_after([](json& c) { c["class_names"] = {"cat"}; }));
}

TEST(ModelConfig, SampleSizeNotAMultipleOfTheDownsampling) {
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "config.json: key 'sample_size': expected a multiple of 4 (one halving per downsampler), got 30",
                      error_after([](json& c) { c["sample_size"] = 30; }));
}

TEST(ModelConfig, NotAJsonObject) {
  EXPECT_PRED_FORMAT2(IsSubstring, "config.json: not valid JSON: ",
                      error_of([] { parse_model_config("{\"name\": ", "config.json"); }));
  EXPECT_PRED_FORMAT2(IsSubstring, "config.json: expected a JSON object at the top level, got array [1]",
                      error_of([] { parse_model_config("[1]", "config.json"); }));
}

TEST(ModelConfig, LoadReadsTheFileAndNamesItInErrors) {
  const std::string path = cat(testing::TempDir(), "rtvd_model_config_", getpid(), ".json");
  {
    std::ofstream out(path);
    json config = minimal_config();
    config["name"] = "from file";
    out << config.dump(2);
  }
  EXPECT_EQ(load_model_config(path).name, "from file");
  {
    std::ofstream out(path);
    json config = minimal_config();
    config["sample_size"] = 0;
    out << config.dump();
  }
  EXPECT_PRED_FORMAT2(IsSubstring, path + ": key 'sample_size': expected an integer in [1, 4096], got number 0",
                      error_of([&] { load_model_config(path); }));
  std::remove(path.c_str());
  EXPECT_PRED_FORMAT2(IsSubstring, path + ": cannot open: No such file or directory",
                      error_of([&] { load_model_config(path); }));
}

}  // namespace
}  // namespace rtvd
