// Model files made to hurt: NaN and infinite weights, JSON nested 100,000 deep, and an architecture whose
// every key is within bounds but which no machine could hold. Each is refused with one line naming the file
// and what was wrong, in the library and through the rtvd binary (exit 1, nothing else printed), fast.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "pipeline/engine.h"
#include "pipeline/graph/weights.h"
#include "pipeline/model_files/half.h"
#include "pipeline/model_files/safetensors.h"
#include "support/process.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using testing::IsSubstring;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The bits of a finite value of dtype, drawn at random (exponent not all ones).
uint64_t finite_bits(DType dtype, test::Rng& rng) {
  const float f = rng.uniform(-4.0f, 4.0f);
  uint32_t f32;
  std::memcpy(&f32, &f, 4);
  switch (dtype) {
    case DType::F16: return float_to_half(f);
    case DType::BF16: return f32 >> 16;
    case DType::F64: {
      const double d = f;
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      return bits;
    }
    default: return f32;
  }
}

// NaN, +Inf or -Inf in dtype.
uint64_t non_finite_bits(DType dtype, int kind) {
  const uint64_t sign = kind == 2 ? 1 : 0;
  switch (dtype) {
    case DType::F16: return sign << 15 | 0x7c00 | (kind == 0 ? 0x200 : 0);
    case DType::BF16: return sign << 15 | 0x7f80 | (kind == 0 ? 0x40 : 0);
    case DType::F64: return sign << 63 | 0x7ff0000000000000ull | (kind == 0 ? 1ull << 51 : 0);
    default: return sign << 31 | 0x7f800000u | (kind == 0 ? 1u << 22 : 0);
  }
}

TensorToWrite random_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, test::Rng& rng) {
  TensorToWrite t{name, dtype, std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  const size_t size = dtype_size(dtype);
  t.bytes.resize(size_t(n) * size);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = finite_bits(dtype, rng);
    std::memcpy(t.bytes.data() + size_t(i) * size, &bits, size);  // little-endian: the low bytes
  }
  return t;
}

// NaN or infinite weights gave exit 0 and a black video. Every float dtype is checked at load, and the error
// names the tensor and the first bad element; a file of finite values of any size passes.
TEST(HostileWeights, NonFiniteValuesAreRefusedNamingTheTensorAndElement) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  test::TempDir dir;
  const char* kinds[] = {"NaN", "+Inf", "-Inf"};
  for (DType dtype : {DType::F16, DType::F32, DType::BF16, DType::F64}) {
    std::vector<TensorToWrite> tensors;
    for (int i = 0; i < 4; ++i)  // sizes around the checker's blocks of 4096 and its parallel threshold
      tensors.push_back(random_tensor(cat("block.", i, ".weight"), dtype, {rng.integer(1, 300), rng.integer(1, 300)}, rng));
    const std::string path = dir.path(cat(dtype_name(dtype), ".safetensors"));
    write_safetensors(path, tensors);
    EXPECT_NO_THROW(WeightStore(SafeTensorsFile::open(path)).check_finite()) << dtype_name(dtype);

    const int kind = rng.integer(0, 2);
    TensorToWrite& bad = tensors[size_t(rng.integer(0, 3))];
    const int64_t numel = int64_t(bad.bytes.size() / dtype_size(dtype));
    const int64_t first = rng.integer(0, int(numel) - 1);
    for (int64_t i : {first, std::min(numel - 1, first + rng.integer(0, 5000))}) {  // a later one is not the first
      const uint64_t bits = non_finite_bits(dtype, kind);
      std::memcpy(bad.bytes.data() + size_t(i) * dtype_size(dtype), &bits, dtype_size(dtype));
    }
    write_safetensors(path, tensors);
    SCOPED_TRACE(cat(dtype_name(dtype), " ", bad.name, " element ", first));
    EXPECT_EQ(error_of([&] { WeightStore(SafeTensorsFile::open(path)).check_finite(); }),
              cat(path, ": tensor '", bad.name, "' holds ", kinds[kind], " at element ", first, " of ",
                  shape_string(bad.shape), ", expected finite weights"));
  }
}

// A checkpoint of 64 MB or more is checked on a thread of its own while the caller goes on: constructing the
// store does not wait, and its first use throws the same error.
TEST(HostileWeights, ALargeCheckpointsCheckRunsBesideTheCallerAndItsErrorReachesTheFirstUse) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  test::TempDir dir;
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 3; ++i) {  // 3 x 24 MB of finite fp16 (0x3c00 = 1.0, a random low bit)
    TensorToWrite t{cat("block.", i, ".weight"), DType::F16, {3072, 4096}, std::vector<uint8_t>(size_t(3072) * 4096 * 2)};
    for (size_t k = 0; k < t.bytes.size(); k += 2) t.bytes[k] = uint8_t(k * 7), t.bytes[k + 1] = 0x3c;
    tensors.push_back(std::move(t));
  }
  const std::string path = dir.path("large.safetensors");
  write_safetensors(path, tensors);
  EXPECT_NO_THROW(WeightStore(SafeTensorsFile::open(path)).check_finite());

  TensorToWrite& bad = tensors[size_t(rng.integer(0, 2))];
  const int64_t element = rng.integer(0, int(bad.bytes.size() / 2) - 1);
  const uint16_t inf = 0xfc00;  // -Inf
  std::memcpy(bad.bytes.data() + 2 * element, &inf, 2);
  write_safetensors(path, tensors);
  const std::string expected = cat(path, ": tensor '", bad.name, "' holds -Inf at element ", element, " of ",
                                   shape_string(bad.shape), ", expected finite weights");
  std::optional<WeightStore> store;
  ASSERT_NO_THROW(store.emplace(SafeTensorsFile::open(path)));
  EXPECT_EQ(error_of([&] { store->view(bad.name, bad.shape); }), expected);
  EXPECT_EQ(error_of([&] { store->check_all_read(); }), expected) << "every use throws it";
}

// A model directory for the binary: config.json (the default model's, edited) and weights.safetensors.
class HostileModel : public testing::Test {
 protected:
  json default_config() const {
    std::ifstream in(test::assets_dir() + "/default/config.json");
    return json::parse(in);
  }
  std::string model_dir(const std::string& config_text, const std::string& weights_from) const {
    const std::string dir = temp_.path(cat("model", ++models_));
    fs::create_directories(dir);
    std::ofstream(dir + "/config.json") << config_text;
    fs::copy_file(weights_from, dir + "/weights.safetensors");
    return dir;
  }
  std::string default_weights() const { return test::assets_dir() + "/default/weights.safetensors"; }
  test::RunResult rtvd(const std::vector<std::string>& args) const {
    const fs::path logs = temp_.dir() / cat("logs", ++runs_);
    fs::create_directories(logs);
    return test::run_program(test::rtvd_binary(), args, test::environment(), logs, 120);
  }
  // rtvd refuses the model: exit 1, one line on stderr starting with `error`, nothing on stdout, fast.
  void expect_refused(const std::vector<std::string>& args, const std::string& error) const {
    SCOPED_TRACE(args.back());
    const auto start = std::chrono::steady_clock::now();
    const test::RunResult r = rtvd(args);
    EXPECT_LT(seconds_since(start), 10.0) << "a process start included";
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(r.err.starts_with("rtvd: error: " + error)) << r.err.substr(0, 500);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 500);
  }

  test::TempDir temp_{"rtvd_hostile"};
  mutable int models_ = 0, runs_ = 0;
};

// ~70,000 nested '[' in config.json or in the weights' header was a SIGSEGV (exit 139).
TEST_F(HostileModel, DeepNestingIsOneLineAndExit1) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const size_t depth = size_t(rng.integer(70'000, 200'000));
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');

  json config = default_config();
  std::string text = config.dump();
  text.insert(text.size() - 1, ",\"class_names\":" + nested);
  const std::string bad_config = model_dir(text, default_weights());
  expect_refused({"info", "--device", "cpu", "--model", bad_config},
                 bad_config + "/config.json: JSON nested deeper than 64 levels (at byte ");

  const std::string weights = temp_.path("nested.safetensors");
  {
    std::ofstream out(weights, std::ios::binary);
    const uint64_t length = nested.size();
    out.write(reinterpret_cast<const char*>(&length), 8);  // little-endian, as the format's length
    out << nested;
  }
  const std::string bad_weights = model_dir(config.dump(), weights);
  for (const char* command : {"info", "render"})
    expect_refused({command, "--device", "cpu", "--model", bad_weights},
                   bad_weights + "/weights.safetensors: header: JSON nested deeper than 64 levels (at byte ");
}

// One NaN in the default model's weights: refused at load, naming the tensor.
TEST_F(HostileModel, NaNWeightIsOneLineNamingTheTensor) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const SafeTensorsFile original = SafeTensorsFile::open(default_weights());
  std::vector<TensorToWrite> tensors;
  for (const TensorView& t : original.tensors()) tensors.push_back({t.name, t.dtype, t.shape, {t.data, t.data + t.bytes}});
  TensorToWrite& bad = tensors[size_t(rng.integer(0, int(tensors.size()) - 1))];
  ASSERT_EQ(bad.dtype, DType::F16);
  const int64_t element = rng.integer(0, int(bad.bytes.size() / 2) - 1);
  const uint16_t nan = 0x7e00;
  std::memcpy(bad.bytes.data() + 2 * element, &nan, 2);
  const std::string weights = temp_.path("nan.safetensors");
  write_safetensors(weights, tensors);
  const std::string dir = model_dir(default_config().dump(), weights);
  expect_refused({"render", "--device", "cpu", "-o", temp_.path("out.mp4"), "--model", dir},
                 cat(dir, "/weights.safetensors: tensor '", bad.name, "' holds NaN at element ", element, " of ",
                     shape_string(bad.shape), ", expected finite weights"));
  EXPECT_FALSE(fs::exists(temp_.path("out.mp4")));
}

// Every key within its bound, but 8192 channels at 4096x4096: terabytes. Refused from the config alone,
// before the graph is built or a byte allocated (the weights file holds nothing), saying how much it needs
// and how much the machine has.
TEST_F(HostileModel, ArchitectureTooLargeForTheMachineIsRefusedBeforeBuilding) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  json config = default_config();
  const int channels = 8192 - 32 * rng.integer(0, 3);  // attention_head_dim 32 divides it
  config["block_out_channels"] = {channels, channels, channels};
  config["layers_per_block"] = rng.integer(4, 8);
  config["sample_size"] = 4096;
  const std::string empty_weights = temp_.path("empty.safetensors");
  write_safetensors(empty_weights, {});
  const std::string dir = model_dir(config.dump(), empty_weights);
  const std::string needs = "rtvd-emoji-64 at --size 4096x4096 needs at least ";

  EngineOptions o;
  o.model.path = dir;
  o.device = DeviceKind::Cpu;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { Engine engine(o); });
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_PRED_FORMAT2(IsSubstring, needs, message);
  EXPECT_PRED_FORMAT2(IsSubstring, " TiB (weights ", message);
  EXPECT_PRED_FORMAT2(IsSubstring, "; batch 2, fp32), but host memory ", message);

  expect_refused({"render", "--device", "cpu", "-o", temp_.path("big.mp4"), "--model", dir}, needs);
  // The same architecture at a size it can hold gets past the memory check, to the missing weights.
  EXPECT_PRED_FORMAT2(IsSubstring, "weights.safetensors: tensor 'time_embedding.linear_1.",
                      error_of([&] {
                        o.width = o.height = 4;
                        config["block_out_channels"] = {32, 32, 32};
                        std::ofstream(dir + "/config.json") << config.dump();
                        Engine engine(o);
                      }));
}

// --size: each side at most 4096, checked by the flag (and by the engine for other callers) before any work.
TEST_F(HostileModel, HugeFrameSizeIsRefusedAtOnce) {
  expect_refused({"render", "--device", "cpu", "-o", temp_.path("wide.mp4"), "--size", "1000000x4"},
                 "flag '--size': expected sides of at most 4096");
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.width = 4;
  o.height = 1'000'000;
  EXPECT_EQ(error_of([&] { Engine engine(o); }), "--size 4x1000000: width and height must be at most 4096");
}

}  // namespace
}  // namespace rtvd
