// TensorSet (a component's checkpoint tensors under its builder's names: renamed views, row slices, checks
// that name the file's own tensor) and what WeightTensor::write and WeightStore::read do with its tensors:
// F16/BF16/F32 converted as they are written, OIHW reordered, LoRA updates merged in fp32, against a naive
// float64 computation written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "pipeline/graph/weights.h"
#include "pipeline/model_files/half.h"
#include "pipeline/model_files/tensor_set.h"
#include "support/tensor_files.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using test::error_of;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TEST(TensorSet, RenamesViewsOfTheFileAndNamesTheSourceInErrors) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const auto file = test::memory_file("ckpt.safetensors", {test::float_tensor("model.w", DType::F16, {3, 4}, rng.vector(12)),
                                                           test::float_tensor("model.ids", DType::I32, {2}, {0, 0})});
  TensorSet set("ckpt.safetensors");
  set.add("net.weight", *file->find("model.w"), "model.w", file);
  set.add("net.ids", *file->find("model.ids"), "model.ids", file);
  ASSERT_NE(set.find("net.weight"), nullptr);
  EXPECT_EQ(set.find("model.w"), nullptr);
  EXPECT_EQ(set.find("net.weight")->data, file->find("model.w")->data);  // a view, not a copy
  EXPECT_EQ(set.find("net.weight")->name, "net.weight");
  EXPECT_EQ(set.source_name("net.weight"), "model.w");
  EXPECT_EQ(set.parameters(), 14);
  const std::vector<int64_t> right{3, 4}, wrong{4, 3};
  EXPECT_EQ(&set.get_float("net.weight", right), set.find("net.weight"));
  EXPECT_EQ(error_of([&] { set.get_float("net.weight", wrong); }),
            "ckpt.safetensors: tensor 'model.w' (net.weight): expected shape (4, 3), got (3, 4)");
  EXPECT_EQ(error_of([&] { set.get_float("net.ids", std::vector<int64_t>{2}); }),
            "ckpt.safetensors: tensor 'model.ids' (net.ids): expected dtype F16, BF16 or F32, got I32");
  EXPECT_EQ(error_of([&] { set.get_float("net.bias", right); }), "ckpt.safetensors: tensor 'net.bias' is missing");
  EXPECT_EQ(error_of([&] { set.get_rank("net.weight", 4); }),
            "ckpt.safetensors: tensor 'model.w' (net.weight): expected 4 dimensions, got shape (3, 4)");
  EXPECT_EQ(error_of([&] { set.add("net.weight", *file->find("model.w"), "model.w", file); }),
            "ckpt.safetensors: tensor 'net.weight' given twice (by 'model.w')");

  // A set of a whole file names its tensors as the file does, with no source name.
  const TensorSet whole(SafeTensorsFile::build("whole", {{"a", DType::F32, {2}}}, [](size_t, uint8_t* d) { std::memset(d, 0, 8); }));
  EXPECT_EQ(whole.source_name("a"), "");
  EXPECT_EQ(error_of([&] { whole.get_float("a", std::vector<int64_t>{3}); }), "whole: tensor 'a': expected shape (3), got (2)");
}

TEST(TensorSet, RowSliceIsAViewOfTheRows) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    const int rows = rng.integer(3, 12), cols = rng.integer(1, 9);
    const std::vector<float> v = test::bf16_values(size_t(rows * cols), rng);
    const auto file = test::memory_file("f", {test::float_tensor("qkv", dtype, {rows, cols}, v)});
    const TensorView& t = *file->find("qkv");
    const int begin = rng.integer(0, rows - 1), end = rng.integer(begin + 1, rows);
    const TensorView s = row_slice(t, begin, end, "q");
    EXPECT_EQ(s.name, "q");
    EXPECT_EQ(s.shape, (std::vector<int64_t>{end - begin, cols}));
    EXPECT_EQ(s.bytes, size_t(end - begin) * cols * dtype_size(dtype));
    EXPECT_EQ(s.data, t.data + size_t(begin) * cols * dtype_size(dtype));
    const std::vector<double> got = test::values_of(s);
    for (int i = 0; i < (end - begin) * cols; ++i) EXPECT_EQ(got[size_t(i)], v[size_t(begin * cols + i)]) << dtype_name(dtype);

    // A 1-D tensor (a fused bias) slices the same way.
    const TensorView bias = row_slice(reshaped(t, {int64_t(rows) * cols}), begin * cols, end * cols, "b");
    EXPECT_EQ(bias.data, s.data);
    EXPECT_EQ(bias.bytes, s.bytes);
  }
  const auto file = test::memory_file("f", {test::float_tensor("qkv", DType::F32, {6, 2}, std::vector<float>(12, 1.0f))});
  const TensorView& t = *file->find("qkv");
  EXPECT_EQ(error_of([&] { row_slice(t, 4, 7, "v"); }), "tensor 'qkv': rows [4, 7) of shape (6, 2)");
  EXPECT_EQ(error_of([&] { row_slice(t, 3, 3, "v"); }), "tensor 'qkv': rows [3, 3) of shape (6, 2)");
  EXPECT_EQ(error_of([&] { row_slice(t, -1, 2, "v"); }), "tensor 'qkv': rows [-1, 2) of shape (6, 2)");
  EXPECT_EQ(error_of([&] { reshaped(t, {5, 2}); }), "tensor 'qkv': shape (6, 2) cannot be viewed as (5, 2)");
}

TEST(TensorSet, CheckFiniteNamesTheTensorInTheFile) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<float> v = test::bf16_values(50, rng);
    const int bad = rng.integer(0, 49);
    v[size_t(bad)] = std::numeric_limits<float>::infinity();
    v[49] = std::numeric_limits<float>::quiet_NaN();  // later: not the first
    if (bad == 49) v[49] = std::numeric_limits<float>::infinity();
    const auto file = test::memory_file("ckpt.safetensors", {test::float_tensor("first_stage_model.x", dtype, {5, 10}, v)});
    TensorSet set("ckpt.safetensors");
    set.add("decoder.x", *file->find("first_stage_model.x"), "first_stage_model.x", file);
    EXPECT_EQ(error_of([&] { set.check_finite(); }),
              cat("ckpt.safetensors: tensor 'first_stage_model.x' holds +Inf at element ", bad,
                  " of (5, 10), expected finite weights"))
        << dtype_name(dtype);
  }
}

// Bits of an F16 or F32 output element as a float.
float output_element(const std::vector<uint8_t>& out, DType act, size_t i) {
  if (act == DType::F16) {
    uint16_t h;
    std::memcpy(&h, out.data() + 2 * i, 2);
    return half_to_float(h);
  }
  float f;
  std::memcpy(&f, out.data() + 4 * i, 4);
  return f;
}

// Parts of every float dtype written as F32 and F16 activations, as they are and OIHW -> OHWI: the values
// are exact in every dtype (bf16_values), so each output element must equal its input exactly.
TEST(WeightTensorWrite, ConvertsEveryFloatDtypeAndReordersConvs) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int out = rng.integer(1, 5), in = rng.integer(1, 6), kh = rng.integer(1, 3), kw = rng.integer(1, 3);
  const std::vector<int64_t> shape{out, in, kh, kw};
  std::vector<TensorToWrite> tensors;
  std::vector<std::vector<float>> values;
  for (DType dtype : {DType::BF16, DType::F32, DType::F16}) {
    values.push_back(test::bf16_values(size_t(numel(shape)), rng));
    tensors.push_back(test::float_tensor(cat("w", dtype_name(dtype)), dtype, shape, values.back()));
  }
  const auto file = test::memory_file("f", tensors);
  for (const DType act : {DType::F32, DType::F16})
    for (const bool reorder : {false, true}) {
      std::vector<TensorView> parts;
      for (const TensorToWrite& t : tensors) parts.push_back(*file->find(t.name));
      const WeightTensor w = WeightTensor::stacked({3 * out, reorder ? kh : in, reorder ? kw : kh, reorder ? in : kw},
                                                   parts, reorder);
      std::vector<uint8_t> bytes(size_t(w.numel()) * dtype_size(act), 0xff);  // poisoned: NaN in both
      w.write(bytes.data(), act);
      for (size_t p = 0; p < parts.size(); ++p)
        for (int o = 0; o < out; ++o)
          for (int c = 0; c < in; ++c)
            for (int t = 0; t < kh * kw; ++t) {
              const size_t src = size_t((o * in + c) * kh * kw + t);
              const size_t dst = size_t(numel(shape)) * p + size_t(reorder ? (o * kh * kw + t) * in + c : src);
              ASSERT_EQ(output_element(bytes, act, dst), values[p][src])
                  << parts[p].name << " as " << dtype_name(act) << (reorder ? " reordered" : "");
            }
    }
}

// W + sum_k scale_k up_k down_k in float64, in W's own layout: the definition of a merged LoRA update.
std::vector<double> naive_merge(const std::vector<double>& w, int64_t out, int64_t cols,
                                const std::vector<std::tuple<std::vector<double>, std::vector<double>, int64_t, double>>& deltas) {
  std::vector<double> m = w;
  for (const auto& [up, down, rank, scale] : deltas)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t c = 0; c < cols; ++c) {
        double s = 0;
        for (int64_t r = 0; r < rank; ++r) s += up[size_t(o * rank + r)] * down[size_t(r * cols + c)];
        m[size_t(o * cols + c)] += scale * s;
      }
  return m;
}

// A linear weight with two updates (factors of two dtypes) and a conv with a conv update (up (out, r, 1, 1),
// down (r, in, kh, kw)), read through a WeightStore (fp32, PyTorch layout) and written as engine weights
// (the conv OIHW -> OHWI, and stacked after an untouched part as a QKV matrix is): each against naive_merge.
TEST(WeightStoreLora, MergesUpdatesAsTheDefinitionSays) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int out = rng.integer(2, 40), in = rng.integer(2, 40), r1 = rng.integer(1, 8), r2 = rng.integer(1, 8);
  const int co = rng.integer(2, 24), ci = rng.integer(2, 24), kh = 3, kw = 3, rc = rng.integer(1, 6);
  const float s1 = rng.uniform(-2, 2), s2 = rng.uniform(-2, 2), sc = rng.uniform(-2, 2);
  const auto normal = [&](int64_t n) { return rng.normal_vector(size_t(n), 0.3f); };
  const auto model = test::memory_file(
      "model", {test::float_tensor("lin.weight", DType::F16, {out, in}, normal(out * in)),
                test::float_tensor("conv.weight", DType::BF16, {co, ci, kh, kw}, test::bf16_values(size_t(co * ci * kh * kw), rng)),
                test::float_tensor("other.weight", DType::F32, {out, in}, normal(out * in))});
  const auto lora = test::memory_file(
      "lora.safetensors", {test::float_tensor("u1", DType::F32, {out, r1}, normal(out * r1)),
                           test::float_tensor("d1", DType::F32, {r1, in}, normal(r1 * in)),
                           test::float_tensor("u2", DType::BF16, {out, r2}, test::bf16_values(size_t(out * r2), rng)),
                           test::float_tensor("d2", DType::F16, {r2, in}, normal(r2 * in)),
                           test::float_tensor("uc", DType::F32, {co, rc, 1, 1}, normal(co * rc)),
                           test::float_tensor("dc", DType::F32, {rc, ci, kh, kw}, normal(rc * ci * kh * kw))});
  TensorSet set("model");
  for (const TensorView& t : model->tensors()) set.add(t.name, t, "", model);
  const auto& L = *lora;
  set.add_delta("lin.weight", {*L.find("u1"), *L.find("d1"), s1}, lora);
  set.add_delta("lin.weight", {*L.find("u2"), *L.find("d2"), s2}, lora);
  set.add_delta("conv.weight", {*L.find("uc"), *L.find("dc"), sc}, lora);
  WeightStore store(std::move(set));
  const auto v = [&](const char* name) { return test::values_of(*L.find(name)); };
  const std::vector<double> lin_want =
      naive_merge(test::values_of(*model->find("lin.weight")), out, in, {{v("u1"), v("d1"), r1, s1}, {v("u2"), v("d2"), r2, s2}});
  const std::vector<double> conv_want =
      naive_merge(test::values_of(*model->find("conv.weight")), co, ci * kh * kw, {{v("uc"), v("dc"), rc, sc}});
  // fp32 accumulation of a few products of O(1) values: within a few float ulps of the float64 definition.
  const auto expect_close = [](const std::vector<float>& got, const std::vector<double>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << what << " element " << i;
  };
  const std::vector<float> lin = store.read("lin.weight", {out, in});
  expect_close(lin, lin_want, "lin.weight read");
  expect_close(store.read("conv.weight", {co, ci, kh, kw}), conv_want, "conv.weight read");
  const std::vector<double> other = test::values_of(*model->find("other.weight"));
  const std::vector<float> other_read = store.read("other.weight", {out, in});
  for (size_t i = 0; i < other.size(); ++i) ASSERT_EQ(other_read[i], other[i]) << "other.weight is untouched";

  // Engine weights: [other; lin] stacked as a fused projection, and the conv reordered OIHW -> OHWI.
  const Ref stacked = store.get("stacked", Elem::Act, [&] {
    return WeightTensor::stacked({2 * out, in}, {store.view("other.weight", {out, in}), store.view("lin.weight", {out, in})});
  });
  const Ref conv = store.get("conv", Elem::Act, [&] {
    return WeightTensor::stacked({co, kh, kw, ci}, {store.view("conv.weight", {co, ci, kh, kw})}, true);
  });
  for (const DType act : {DType::F32, DType::F16}) {
    // F16: the merged fp32 value rounded once, within half an fp16 ulp (2^-11 relative).
    const double tolerance = act == DType::F32 ? 1e-5 : 1.0 / 2048;
    const WeightTensor& s = store.tensors()[size_t(stacked.id)];
    std::vector<uint8_t> bytes(size_t(s.numel()) * dtype_size(act), 0xff);
    s.write(bytes.data(), act);
    for (size_t i = 0; i < other.size(); ++i) {
      // fp16: half an ulp relative, or half the subnormal spacing (2^-25) for values below fp16's normal range.
      ASSERT_NEAR(output_element(bytes, act, i), other[i],
                  act == DType::F32 ? 0.0 : tolerance * std::abs(other[i]) + std::ldexp(1.0, -25));
      ASSERT_NEAR(output_element(bytes, act, other.size() + i), lin_want[i], tolerance * (1 + std::abs(lin_want[i])))
          << dtype_name(act) << " element " << i;
    }
    const WeightTensor& c = store.tensors()[size_t(conv.id)];
    bytes.assign(size_t(c.numel()) * dtype_size(act), 0xff);
    c.write(bytes.data(), act);
    for (int o = 0; o < co; ++o)
      for (int t = 0; t < kh * kw; ++t)
        for (int ch = 0; ch < ci; ++ch) {
          const double want = conv_want[size_t((o * ci + ch) * kh * kw + t)];
          ASSERT_NEAR(output_element(bytes, act, size_t((o * kh * kw + t) * ci + ch)), want, tolerance * (1 + std::abs(want)))
              << dtype_name(act) << " conv (" << o << ", " << t << ", " << ch << ")";
        }
  }
}

// Factors that do not make an update of the weight, or are not finite floats: errors naming the LoRA file,
// the factors and the weight.
TEST(WeightStoreLora, FactorsAreChecked) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const auto model = test::memory_file("model", {test::float_tensor("w", DType::F16, {6, 5}, rng.vector(30)),
                                                 test::float_tensor("c", DType::F16, {6, 5, 3, 3}, rng.vector(270))});
  std::vector<float> nan_values = rng.vector(12);
  nan_values[7] = std::numeric_limits<float>::quiet_NaN();
  const auto lora = test::memory_file(
      "lora.safetensors", {test::float_tensor("up", DType::F32, {6, 2}, rng.vector(12)),
                           test::float_tensor("down", DType::F32, {2, 5}, rng.vector(10)),
                           test::float_tensor("down_t", DType::F32, {5, 2}, rng.vector(10)),
                           test::float_tensor("up_nan", DType::F32, {6, 2}, nan_values),
                           {"up_int", DType::I32, {6, 2}, std::vector<uint8_t>(48)},
                           test::float_tensor("down_conv", DType::F32, {2, 5, 3, 3}, rng.vector(90)),
                           test::float_tensor("up_conv", DType::F32, {6, 2, 1, 1}, rng.vector(12)),
                           test::float_tensor("up_big", DType::F32, {6, 2}, std::vector<float>(12, 3e30f)),
                           test::float_tensor("down_big", DType::F32, {2, 5}, std::vector<float>(10, 3e30f))});
  TensorSet set("model");
  for (const TensorView& t : model->tensors()) set.add(t.name, t, "", model);
  const auto& L = *lora;
  EXPECT_EQ(error_of([&] { set.add_delta("w", {*L.find("up"), *L.find("down_t"), 1}, lora); }),
            "lora.safetensors: 'up' (6, 2) and 'down_t' (5, 2) do not make an update of 'w' (6, 5) (expected up "
            "(out, rank) and down (rank, in), or a conv's (out, rank, 1, 1) and (rank, in, kh, kw))");
  EXPECT_EQ(error_of([&] { set.add_delta("c", {*L.find("up"), *L.find("down"), 1}, lora); }),
            "lora.safetensors: 'up' (6, 2) and 'down' (2, 5) do not make an update of 'c' (6, 5, 3, 3) (expected up "
            "(out, rank) and down (rank, in), or a conv's (out, rank, 1, 1) and (rank, in, kh, kw))");
  EXPECT_EQ(error_of([&] { set.add_delta("w", {*L.find("up_nan"), *L.find("down"), 1}, lora); }),
            "lora.safetensors: 'up_nan' holds NaN at element 7 of (6, 2), expected finite values");
  EXPECT_EQ(error_of([&] { set.add_delta("w", {*L.find("up_int"), *L.find("down"), 1}, lora); }),
            "lora.safetensors: 'up_int': a LoRA factor must be F16, BF16 or F32, got I32");
  EXPECT_EQ(error_of([&] { set.add_delta("x", {*L.find("up"), *L.find("down"), 1}, lora); }),
            "lora.safetensors: no tensor 'x' in model for the update 'up'");
  EXPECT_EQ(error_of([&] { set.add_delta("w", {*L.find("up"), *L.find("down"), std::numeric_limits<float>::infinity()}, lora); }),
            "lora.safetensors: the update of 'w' by 'up' has scale inf");
  EXPECT_EQ(set.deltas("w"), nullptr);  // nothing attached by a failed call
  // Finite factors whose product overflows float: found where the update is merged.
  TensorSet overflowing = set;
  overflowing.add_delta("w", {*L.find("up_big"), *L.find("down_big"), 1}, lora);
  WeightStore store(std::move(overflowing));
  EXPECT_EQ(error_of([&] { store.read("w", {6, 5}); }),
            "lora.safetensors: the LoRA update of 'w' ('up_big' x 'down_big') makes element 0 of (6, 5) inf, expected "
            "finite weights");
  set.add_delta("c", {*L.find("up_conv"), *L.find("down_conv"), 1}, lora);
  ASSERT_NE(set.deltas("c"), nullptr);
  EXPECT_EQ(set.deltas("c")->size(), 1u);
}

// A merged weight that float holds but fp16 does not (the GPU's weights): an Error naming the LoRA and the
// tensor where the weight is written as fp16, where fp16 rounds it to Inf (from 65520 on); written as fp32
// (the CPU's) it is the merged value.
TEST(WeightStoreLora, AWeightBeyondFp16IsAnErrorWhereWrittenAsFp16) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const auto model = test::memory_file("model", {test::float_tensor("w", DType::F16, {2, 3}, {0, 0, 0, 0, 0, 0})});
  const auto lora = test::memory_file("lora.safetensors", {test::float_tensor("up", DType::F32, {2, 1}, {1, 1}),
                                                           test::float_tensor("down", DType::F32, {1, 3}, {1, 1, 1})});
  const auto weight_written = [&](float scale, DType as) {
    TensorSet set("model");
    set.add("w", *model->find("w"), "", model);
    set.add_delta("w", {*lora->find("up"), *lora->find("down"), scale}, lora);
    WeightStore store(std::move(set));
    store.get("w", Elem::Act, [&] { return WeightTensor::stacked({2, 3}, {store.view("w", {2, 3})}); });
    std::vector<uint8_t> out(6 * 4);
    store.tensors()[0].write(out.data(), as);
    return out;
  };
  const float fits = rng.uniform(1000.0f, 65504.0f), beyond = rng.uniform(65520.0f, 1e30f);
  SCOPED_TRACE(cat("scales ", fits, " and ", beyond));
  const std::vector<uint8_t> half = weight_written(fits, DType::F16);
  uint16_t h;
  std::memcpy(&h, half.data(), 2);
  EXPECT_EQ(half_to_float(h), half_to_float(float_to_half(fits)));
  EXPECT_EQ(error_of([&] { weight_written(beyond, DType::F16); }),
            cat("lora.safetensors: the LoRA update of 'w' ('up' x 'down') makes element 0 of (2, 3) ", beyond,
                ", beyond fp16's range (65504), the GPU's weights: lower the LoRA's scale"));
  const std::vector<uint8_t> single = weight_written(beyond, DType::F32);
  float f;
  std::memcpy(&f, single.data(), 4);
  EXPECT_EQ(f, beyond);
}

}  // namespace
}  // namespace rtvd
