// The sampler ops on their case tables (kernels/denoise/denoise_cases.h): guidance_step (classifier-free
// guidance and a linear sampler step, with fresh noise and a scaled model input) and denoise_blend (the last
// step fused with the temporal blend and the RGBA8 conversion, or a decoded image blended and converted), plus
// the CPU conversion denoise_blend ends with (to_rgba8_cpu). Fresh random inputs and coefficients every run
// (the seed is in the failure message); outputs poisoned.
//   <Op>Cpu: the CPU reference against a naive definition: fp32 results rel L2 <= 1e-5, the model input
//     exactly x; denoise_blend's bytes within one step of the naive conversion (fp32 may round a value
//     within ~1e-4 of a tie to the other side).
//   <Op>Cuda (CUDA builds, skipping without a device): the kernel against the CPU reference on the same
//     values. The kernels use the reference's own operations (no FMA): fp32 outputs rel L2 <= 1e-6;
//     denoise_blend's bytes must equal to_rgba8_cpu of its own prev output exactly, and the reference's
//     bytes within one step (a 1-ulp difference in prev may cross a rounding boundary).
//   denoise_blend's non-finite flag, on both: 0 on finite inputs (it starts poisoned); with one NaN or Inf
//     put into one element of one input, 1 exactly when the op reads that input (prev is not read on the
//     first frame), and every output element but that one's as without it, bit for bit; 1 when a step of
//     finite values overflows float.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/denoise/denoise.h"
#include "kernels/denoise/denoise_cases.h"
#include "support/test_util.h"
#if RTVD_HAS_CUDA
#include "kernels/denoise/denoise.cuh"
#include "support/cuda_test_util.h"
#endif

namespace rtvd {

void PrintTo(const GuidanceStepCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const DenoiseBlendCase& c, std::ostream* os) { *os << c.name; }

namespace {

using test::rel_l2;

constexpr double kTolerance = 1e-5;

std::string describe(const DenoiseBlendCase& c) {
  return cat(c.name, ": h ", c.h, " w ", c.w, " c ", c.c, " batch ", c.batch, " first ", c.first, " rgba ", c.rgba);
}

int max_byte_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

constexpr int32_t kPoisonedFlag = 0x7b7b7b7b;  // neither 0 nor 1: the op must write the flag

// One run of denoise_blend: its inputs (v with both images where the case has two; prev poisoned on the
// first frame, which does not read it) and what it leaves.
struct BlendInputs {
  std::vector<float> v, x, prev;
  StepScalars s;
  float blend = 0;
};
struct BlendOutputs {
  std::vector<float> x, prev;
  std::vector<uint8_t> rgba;
  int32_t nonfinite = kPoisonedFlag;
};
using BlendRun = std::function<BlendOutputs(const DenoiseBlendCase&, const BlendInputs&)>;

BlendInputs random_blend_inputs(const DenoiseBlendCase& c, test::Rng& rng);

// The cases of frames up to 512^2 (tiles, tails, every layout): the flag's checks run the op several times.
std::vector<DenoiseBlendCase> flag_cases() {
  return test::cases_where(denoise_blend_cases(), [](const DenoiseBlendCase& c) { return c.h * c.w <= 512 * 512; });
}

// The flag against the inputs (the header's "non-finite flag"), through `run` (the CPU reference or the kernel).
void expect_flag_exactly_for_nonfinite_inputs(const DenoiseBlendCase& c, const BlendRun& run, test::Rng& rng) {
  SCOPED_TRACE(describe(c));
  const size_t count = size_t(c.h) * c.w * c.c;
  const BlendInputs clean = random_blend_inputs(c, rng);
  const BlendOutputs base = run(c, clean);
  ASSERT_EQ(base.nonfinite, 0) << "finite inputs";
  struct Input {
    const char* name;
    std::vector<float> BlendInputs::*values;
    size_t offset;  // of the image within v
    bool read;
  };
  std::vector<Input> inputs = {{"v (conditional)", &BlendInputs::v, 0, true},
                               {"x", &BlendInputs::x, 0, c.x},
                               {"prev", &BlendInputs::prev, 0, !c.first}};
  if (c.batch == 2) inputs.push_back({"v (unconditional)", &BlendInputs::v, count, true});
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (const Input& input : inputs) {
    const size_t i = size_t(rng.integer(0, int(count) - 1));
    BlendInputs poisoned = clean;
    (poisoned.*input.values)[input.offset + i] = bad[rng.integer(0, 2)];
    SCOPED_TRACE(cat(input.name, " element ", i, " = ", (poisoned.*input.values)[input.offset + i]));
    const BlendOutputs out = run(c, poisoned);
    EXPECT_EQ(out.nonfinite, input.read ? 1 : 0);
    const size_t changed = input.read ? i : count;  // the one element that may differ (none when not read)
    if (input.read) EXPECT_FALSE(std::isfinite(out.prev[i])) << "the value the flag is for";
    for (size_t j = 0; j < count; ++j)
      if (j != changed) {
        if (c.x) ASSERT_EQ(out.x[j], base.x[j]) << "x element " << j;
        ASSERT_EQ(out.prev[j], base.prev[j]) << "prev element " << j;
      }
    if (!c.x) EXPECT_EQ(std::memcmp(out.x.data(), poisoned.x.data(), count * 4), 0) << "no sample: x is not written";
    for (size_t b = 0; b < out.rgba.size(); ++b)
      if (b / 4 != changed / size_t(c.c)) ASSERT_EQ(out.rgba[b], base.rgba[b]) << "RGBA8 byte " << b;
  }
  // Finite values whose step overflows float: guidance FLT_MAX on v_c - v_u = 3 (batch 2), or out_coef FLT_MAX
  // on v_c = 2 (batch 1).
  BlendInputs overflowing = clean;
  std::fill(overflowing.v.begin(), overflowing.v.begin() + count, 2.0f);
  std::fill(overflowing.v.begin() + count, overflowing.v.end(), -1.0f);
  (c.batch == 2 ? overflowing.s.guidance : overflowing.s.out_coef) = std::numeric_limits<float>::max();
  EXPECT_EQ(run(c, overflowing).nonfinite, 1) << "a step that overflows float";
}

// ---------------------------------------------------------------------------------------------------
// CPU references

class GuidanceStepCpu : public testing::TestWithParam<GuidanceStepCase> {};
class DenoiseBlendCpu : public testing::TestWithParam<DenoiseBlendCase> {};

StepScalars random_scalars(test::Rng& rng) {
  StepScalars s;
  s.guidance = rng.uniform(1.0f, 9.0f);
  s.x_coef = rng.uniform(0.5f, 1.5f);
  s.out_coef = rng.uniform(-1.0f, 1.0f);
  s.noise_coef = rng.uniform(0.0f, 1.0f);
  s.input_scale = rng.uniform(0.1f, 1.0f);
  return s;
}

BlendInputs random_blend_inputs(const DenoiseBlendCase& c, test::Rng& rng) {
  const size_t count = size_t(c.h) * c.w * c.c;
  BlendInputs in;
  in.v = test::round_to_half(rng.normal_vector(count * c.batch));  // as the GPU holds them
  in.x = rng.normal_vector(count);
  in.prev = c.first ? test::poisoned(count) : rng.vector(count);
  in.s = random_scalars(rng);
  in.blend = rng.uniform(0.0f, 0.9f);
  return in;
}

BlendOutputs blend_on_cpu(const DenoiseBlendCase& c, const BlendInputs& in) {
  BlendOutputs out;
  out.x = in.x;
  out.prev = in.prev;
  out.rgba.assign(size_t(c.h) * c.w * 4, 17);
  denoise_blend_cpu(denoise_blend_params(c, in.v.data(), out.x.data(), out.prev.data(), out.rgba.data(), &out.nonfinite,
                                         in.s, in.blend));
  return out;
}

// The guided model output v_u + g (v_c - v_u) (v_c at batch 1), in double.
double guided(const std::vector<float>& v, size_t count, size_t i, int batch, double guidance) {
  if (batch == 1) return v[i];
  const double cond = v[i], uncond = v[count + i];
  return uncond + guidance * (cond - uncond);
}

// x <- x_coef x + out_coef v + noise_coef noise; the model input input_scale x in each copy.
TEST_P(GuidanceStepCpu, AppliesGuidanceAndTheLinearStep) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const GuidanceStepCase& c = GetParam();
  const size_t count = size_t(c.count);
  const int copies = c.copies > 0 ? c.copies : c.batch;
  const std::vector<float> v = rng.vector(c.batch * count), x0 = rng.vector(count), noise = rng.normal_vector(count);
  const StepScalars s = random_scalars(rng);
  std::vector<float> expected, expected_in;
  for (size_t i = 0; i < count; ++i) {
    double x = double(s.x_coef) * x0[i];
    if (c.v) x += double(s.out_coef) * guided(v, count, i, c.batch, s.guidance);
    if (c.noise) x += double(s.noise_coef) * noise[i];
    expected.push_back(float(x));
    expected_in.push_back(float(double(s.input_scale) * x));
  }
  std::vector<float> x = x0, model_in = test::poisoned(copies * count);
  guidance_step_cpu(guidance_step_params(c, v.data(), x.data(), noise.data(), model_in.data(), s));
  EXPECT_LE(rel_l2(x, expected), kTolerance);
  for (int b = 0; c.model_in && b < copies; ++b)
    EXPECT_LE(rel_l2(std::vector<float>(model_in.begin() + b * count, model_in.begin() + (b + 1) * count), expected_in),
              kTolerance) << "copy " << b;
  if (!c.model_in) EXPECT_TRUE(std::all_of(model_in.begin(), model_in.end(), [](float f) { return std::isnan(f); }));
}

// Rectified flow's step (x_coef 1, out_coef -dt, no noise, input scale 1) is x - dt v exactly, as before the
// step was made general: the same frames, byte for byte.
TEST(GuidanceStepFlow, IsXMinusDtVExactly) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const GuidanceStepCase c{.name = "flow", .count = 999};
  const std::vector<float> v = rng.vector(2 * 999), x0 = rng.vector(999);
  const float dt = rng.uniform(0.05f, 0.5f), guidance = rng.uniform(1.0f, 8.0f);
  std::vector<float> x = x0, model_in(2 * 999);
  guidance_step_cpu(guidance_step_params(c, v.data(), x.data(), nullptr, model_in.data(),
                                         StepScalars{.guidance = guidance, .x_coef = 1.0f, .out_coef = -dt}));
  for (size_t i = 0; i < 999; ++i) {
    const float velocity = v[999 + i] + guidance * (v[i] - v[999 + i]);
    EXPECT_EQ(x[i], x0[i] - dt * velocity) << i;
    EXPECT_EQ(model_in[i], x[i]);
    EXPECT_EQ(model_in[999 + i], x[i]);
  }
}

// A stream batch's step writes x' to the next slot (x_out) and leaves x as it was: the same x' as in place.
TEST(GuidanceStepXOut, WritesTheInPlaceStepToXOutAndLeavesX) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const GuidanceStepCase c{.name = "x_out", .count = 1003, .noise = true};
  const std::vector<float> v = rng.vector(2 * 1003), x0 = rng.vector(1003), noise = rng.normal_vector(1003);
  const StepScalars s = random_scalars(rng);
  std::vector<float> in_place = x0, in_place_model_in(2 * 1003);
  guidance_step_cpu(guidance_step_params(c, v.data(), in_place.data(), noise.data(), in_place_model_in.data(), s));
  std::vector<float> x = x0, x_out = test::poisoned(1003), model_in = test::poisoned(2 * 1003);
  GuidanceStepParams p = guidance_step_params(c, v.data(), x.data(), noise.data(), model_in.data(), s);
  p.x_out = x_out.data();
  guidance_step_cpu(p);
  EXPECT_EQ(x, x0);
  EXPECT_EQ(x_out, in_place);
  EXPECT_EQ(model_in, in_place_model_in);
}

// One frame of a stream batch's v [c0 c1 c2 | u0 u1 u2]: frame 1 at v + count with v_half 3 count gives what
// [c1 | u1] gives with the default v_half.
DenoiseBlendParams stream_frame_params(const DenoiseBlendCase& c, const void* v, int64_t v_half, float* x, float* prev,
                                       uint8_t* rgba, const StepScalars& s, float blend) {
  DenoiseBlendParams p = denoise_blend_params(c, v, x, prev, rgba, nullptr, s, blend);
  p.v_half = v_half;
  return p;
}

TEST(DenoiseBlendVHalf, TakesTheUnconditionalImageVHalfAfter) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const DenoiseBlendCase c{.name = "stream", .h = 24, .w = 20};
  const size_t count = size_t(c.h) * c.w * c.c;
  const std::vector<float> v = rng.normal_vector(6 * count), x0 = rng.normal_vector(count), prev0 = rng.vector(count);
  std::vector<float> pair(v.begin() + count, v.begin() + 2 * count);
  pair.insert(pair.end(), v.begin() + 4 * count, v.begin() + 5 * count);
  const StepScalars s = random_scalars(rng);
  std::vector<float> x_ref = x0, prev_ref = prev0, x = x0, prev = prev0;
  std::vector<uint8_t> rgba_ref(4 * count / 3), rgba(4 * count / 3, 17);
  denoise_blend_cpu(stream_frame_params(c, pair.data(), 0, x_ref.data(), prev_ref.data(), rgba_ref.data(), s, 0.4f));
  denoise_blend_cpu(stream_frame_params(c, v.data() + count, int64_t(3 * count), x.data(), prev.data(), rgba.data(), s,
                                        0.4f));
  EXPECT_EQ(x, x_ref);
  EXPECT_EQ(prev, prev_ref);
  EXPECT_EQ(rgba, rgba_ref);
}

// x' = x_coef x + out_coef (v_u + g (v_c - v_u)) (out_coef v alone without x); prev <- x' on the first frame,
// else blend prev + (1 - blend) x'; RGBA8 of prev: round((prev + 1) 127.5) clamped, grey replicated, alpha 255.
TEST_P(DenoiseBlendCpu, MatchesNaive) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const DenoiseBlendCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  const size_t pixels = size_t(c.h) * c.w, count = pixels * c.c;
  const std::vector<float> v = rng.normal_vector(count * c.batch), x0 = rng.normal_vector(count);
  const std::vector<float> prev0 = c.first ? test::poisoned(count) : rng.vector(count);
  const StepScalars s = random_scalars(rng);
  const float blend = rng.uniform(0.0f, 0.9f);
  std::vector<float> x_ref(count), prev_ref(count);
  std::vector<uint8_t> rgba_ref(4 * pixels);
  for (size_t i = 0; i < count; ++i) {
    const double step = double(s.out_coef) * guided(v, count, i, c.batch, s.guidance);
    const double x = c.x ? double(s.x_coef) * x0[i] + step : step;
    x_ref[i] = c.x ? float(x) : x0[i];
    prev_ref[i] = float(c.first ? x : blend * double(prev0[i]) + (1.0 - blend) * x);
  }
  for (size_t px = 0; px < pixels; ++px)
    for (int ch = 0; ch < 4; ++ch) {
      const double in = prev_ref[px * c.c + (c.c == 1 ? 0 : std::min(ch, 2))];
      rgba_ref[px * 4 + ch] = ch == 3 ? 255 : uint8_t(std::nearbyint(std::clamp((in + 1.0) * 127.5, 0.0, 255.0)));
    }
  std::vector<float> x = x0, prev = prev0;
  std::vector<uint8_t> rgba(4 * pixels, 17);
  int32_t nonfinite = kPoisonedFlag;
  denoise_blend_cpu(denoise_blend_params(c, v.data(), x.data(), prev.data(), rgba.data(), &nonfinite, s, blend));
  EXPECT_EQ(nonfinite, 0) << "finite inputs";
  if (c.x) EXPECT_LE(rel_l2(x, x_ref), kTolerance);
  else EXPECT_EQ(x, x0) << "without a sample, x is not written";
  EXPECT_LE(rel_l2(prev, prev_ref), kTolerance);
  if (c.rgba) {
    EXPECT_LE(max_byte_diff(rgba, rgba_ref), 1);
  } else {
    EXPECT_TRUE(std::all_of(rgba.begin(), rgba.end(), [](uint8_t b) { return b == 17; })) << "no RGBA8 wanted";
  }
}

class DenoiseBlendFlagCpu : public testing::TestWithParam<DenoiseBlendCase> {};

TEST_P(DenoiseBlendFlagCpu, IsSetExactlyForANonFiniteValue) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  expect_flag_exactly_for_nonfinite_inputs(GetParam(), blend_on_cpu, rng);
}

INSTANTIATE_TEST_SUITE_P(Cases, GuidanceStepCpu, testing::ValuesIn(guidance_step_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, DenoiseBlendCpu, testing::ValuesIn(denoise_blend_cases()), test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, DenoiseBlendFlagCpu, testing::ValuesIn(flag_cases()), test::case_name);

TEST(ToRgba8Cpu, RoundsAndClamps) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int h = 3, w = 7;
  for (int c : {3, 1, 4}) {
    std::vector<float> x = rng.vector(size_t(h) * w * c, -1.3f, 1.3f);
    const std::vector<float> fixed = {-1.0f, 1.0f, 0.0f, -5.0f, 5.0f};  // 0, 255, 127.5 -> 128, clamps
    std::copy(fixed.begin(), fixed.end(), x.begin());
    std::vector<uint8_t> rgba(size_t(h) * w * 4, 17);
    ToRgba8Params p;
    p.x = x.data(), p.rgba = rgba.data(), p.h = h, p.w = w, p.c = c;
    to_rgba8_cpu(p);
    for (int px = 0; px < h * w; ++px)
      for (int ch = 0; ch < 4; ++ch) {
        const double in = x[px * c + (c == 1 ? 0 : std::min(ch, 2))];
        const double exact = std::clamp((in + 1.0) * 127.5, 0.0, 255.0);
        const int expected = ch == 3 ? 255 : int(std::nearbyint(exact));
        // fp32 may round a value within ~1e-4 of a tie to the other side: allow one step only there.
        const bool near_tie = std::fabs(exact - std::floor(exact) - 0.5) < 1e-3;
        EXPECT_LE(std::abs(int(rgba[px * 4 + ch]) - expected), ch < 3 && near_tie ? 1 : 0)
            << "c " << c << " pixel " << px << " channel " << ch << " x " << x[px * c];
      }
    EXPECT_EQ(rgba[0], 0);
    EXPECT_EQ(c == 1 ? rgba[5] : rgba[1], 255);  // pixel 1 of a grey image is x = 1 in all of R, G, B
  }
}

#if RTVD_HAS_CUDA
// ---------------------------------------------------------------------------------------------------
// GPU against the CPU references

constexpr double kExactArithmetic = 1e-6;

class GuidanceStepCuda : public test::OnCuda<GuidanceStepCase> {};
class DenoiseBlendCuda : public test::OnCuda<DenoiseBlendCase> {};

TEST_P(GuidanceStepCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GuidanceStepCase& c = GetParam();
  const int copies = c.copies > 0 ? c.copies : c.batch;
  const size_t count = size_t(c.count), batched = count * c.batch, inputs = count * copies;
  const test::HalfTensor v = test::half_tensor(rng.normal_vector(batched));
  std::vector<float> x_host = rng.normal_vector(count);
  const std::vector<float> noise_host = rng.normal_vector(count);
  const DeviceMemory x = test::to_device_float(x_host), noise = test::to_device_float(noise_host);
  const DeviceMemory model_in = test::poisoned_half(inputs);
  const StepScalars s = random_scalars(rng);
  guidance_step(guidance_step_params(c, v.get(), x.as<float>(), noise.as<float>(), model_in.get(), s), ctx());
  sync();
  std::vector<float> model_in_ref(inputs);
  guidance_step_cpu(guidance_step_params(c, v.host.data(), x_host.data(), noise_host.data(), model_in_ref.data(), s));
  EXPECT_LE(rel_l2(test::from_device_float(x, count), x_host), kExactArithmetic);
  if (c.model_in)
    EXPECT_LE(rel_l2(test::from_device_half(model_in, inputs), test::round_to_half(model_in_ref)), kExactArithmetic);
}

TEST_P(DenoiseBlendCuda, MatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const DenoiseBlendCase& c = GetParam();
  SCOPED_TRACE(describe(c));
  const size_t pixels = size_t(c.h) * c.w, count = pixels * c.c;
  const test::HalfTensor v = test::half_tensor(rng.normal_vector(count * c.batch));
  std::vector<float> x = rng.normal_vector(count);
  std::vector<float> prev = c.first ? test::poisoned(count) : rng.vector(count);
  const DeviceMemory x_d = test::to_device_float(x), prev_d = test::to_device_float(prev);
  const DeviceMemory rgba = test::poisoned_bytes(4 * pixels);
  const DeviceMemory nonfinite = test::to_device_bytes(&kPoisonedFlag, sizeof kPoisonedFlag);
  const StepScalars s = random_scalars(rng);
  const float blend = rng.uniform(0.0f, 0.9f);
  denoise_blend(denoise_blend_params(c, v.get(), x_d.as<float>(), prev_d.as<float>(), rgba.as<uint8_t>(),
                                     nonfinite.as<int32_t>(), s, blend),
                ctx());
  sync();
  std::vector<uint8_t> rgba_ref(4 * pixels);
  denoise_blend_cpu(denoise_blend_params(c, v.host.data(), x.data(), prev.data(), rgba_ref.data(), nullptr, s, blend));
  EXPECT_EQ(test::from_device_bytes(nonfinite, 4), std::vector<uint8_t>(4, 0)) << "the flag of finite inputs";
  const std::vector<float> prev_gpu = test::from_device_float(prev_d, count);
  EXPECT_LE(rel_l2(test::from_device_float(x_d, count), x), kExactArithmetic);
  EXPECT_LE(rel_l2(prev_gpu, prev), kExactArithmetic);
  if (!c.rgba) return;
  const std::vector<uint8_t> bytes = test::from_device_bytes(rgba, 4 * pixels);
  std::vector<uint8_t> own(4 * pixels);
  ToRgba8Params convert;
  convert.x = prev_gpu.data();
  convert.rgba = own.data();
  convert.h = c.h, convert.w = c.w, convert.c = c.c;
  to_rgba8_cpu(convert);
  EXPECT_EQ(bytes, own);
  EXPECT_LE(max_byte_diff(bytes, rgba_ref), 1);
}

class DenoiseBlendFlagCuda : public test::OnCuda<DenoiseBlendCase> {};

// The kernel's flag, through the same checks as the CPU reference's, and equal to the reference's.
TEST_P(DenoiseBlendFlagCuda, IsSetExactlyForANonFiniteValue) {
  SCOPED_TRACE(test::seed_trace(rng));
  const auto on_gpu = [&](const DenoiseBlendCase& c, const BlendInputs& in) {
    const test::HalfTensor v = test::half_tensor(in.v);
    const DeviceMemory x = test::to_device_float(in.x), prev = test::to_device_float(in.prev);
    const size_t count = in.x.size(), bytes = size_t(c.h) * c.w * 4;
    const DeviceMemory rgba = test::poisoned_bytes(bytes);
    const DeviceMemory nonfinite = test::to_device_bytes(&kPoisonedFlag, sizeof kPoisonedFlag);
    denoise_blend(denoise_blend_params(c, v.get(), x.as<float>(), prev.as<float>(), rgba.as<uint8_t>(),
                                       nonfinite.as<int32_t>(), in.s, in.blend),
                  ctx());
    sync();
    BlendOutputs out;
    out.x = test::from_device_float(x, count);
    out.prev = test::from_device_float(prev, count);
    out.rgba = c.rgba ? test::from_device_bytes(rgba, bytes) : std::vector<uint8_t>(bytes, 17);
    const std::vector<uint8_t> flag = test::from_device_bytes(nonfinite, 4);
    std::memcpy(&out.nonfinite, flag.data(), 4);
    EXPECT_EQ(out.nonfinite, blend_on_cpu(c, in).nonfinite) << "the CPU reference's flag";
    return out;
  };
  expect_flag_exactly_for_nonfinite_inputs(GetParam(), on_gpu, rng);
}

class StreamBatchStepsCuda : public test::OnCuda<int> {};

// x_out and v_half on the GPU against the CPU reference (the tests above tie the reference to the in-place
// step and the default layout).
TEST_P(StreamBatchStepsCuda, XOutAndVHalfMatchCpu) {
  SCOPED_TRACE(test::seed_trace(rng));
  const GuidanceStepCase g{.name = "x_out", .count = 4 * 64 * 64 + 8 * GetParam(), .noise = true};
  const size_t n = size_t(g.count);
  const test::HalfTensor v = test::half_tensor(rng.normal_vector(2 * n));
  std::vector<float> x_host = rng.normal_vector(n), x_out_ref(n);
  const std::vector<float> noise_host = rng.normal_vector(n);
  const DeviceMemory x = test::to_device_float(x_host), noise = test::to_device_float(noise_host);
  const DeviceMemory x_out = test::to_device_float(test::poisoned(n)), model_in = test::poisoned_half(2 * n);
  const StepScalars s = random_scalars(rng);
  GuidanceStepParams p = guidance_step_params(g, v.get(), x.as<float>(), noise.as<float>(), model_in.get(), s);
  p.x_out = x_out.as<float>();
  guidance_step(p, ctx());
  std::vector<float> model_in_ref(2 * n);
  GuidanceStepParams q = guidance_step_params(g, v.host.data(), x_host.data(), noise_host.data(), model_in_ref.data(), s);
  q.x_out = x_out_ref.data();
  guidance_step_cpu(q);
  sync();
  EXPECT_EQ(test::from_device_float(x, n), x_host) << "x is left as it was";
  EXPECT_LE(rel_l2(test::from_device_float(x_out, n), x_out_ref), kExactArithmetic);
  EXPECT_LE(rel_l2(test::from_device_half(model_in, 2 * n), test::round_to_half(model_in_ref)), kExactArithmetic);

  const DenoiseBlendCase c{.name = "stream", .h = 64 + GetParam(), .w = 63};
  const size_t count = size_t(c.h) * c.w * c.c, pixels = size_t(c.h) * c.w;
  const test::HalfTensor vb = test::half_tensor(rng.normal_vector(6 * count));
  std::vector<float> xb = rng.normal_vector(count), prev = rng.vector(count);
  const DeviceMemory xb_d = test::to_device_float(xb), prev_d = test::to_device_float(prev);
  const DeviceMemory rgba = test::poisoned_bytes(4 * pixels);
  const float blend = rng.uniform(0.0f, 0.9f);
  denoise_blend(stream_frame_params(c, static_cast<const __half*>(vb.get()) + count, int64_t(3 * count),
                                    xb_d.as<float>(), prev_d.as<float>(), rgba.as<uint8_t>(), s, blend),
                ctx());
  std::vector<uint8_t> rgba_ref(4 * pixels);
  denoise_blend_cpu(stream_frame_params(c, vb.host.data() + count, int64_t(3 * count), xb.data(), prev.data(),
                                        rgba_ref.data(), s, blend));
  sync();
  EXPECT_LE(rel_l2(test::from_device_float(prev_d, count), prev), kExactArithmetic);
  EXPECT_LE(max_byte_diff(test::from_device_bytes(rgba, 4 * pixels), rgba_ref), 1);
}

// 0: the vector paths; 1: a count and a v_half that are no multiples of 8 (the per-element paths).
INSTANTIATE_TEST_SUITE_P(Layouts, StreamBatchStepsCuda, testing::Values(0, 1));

INSTANTIATE_TEST_SUITE_P(Production, GuidanceStepCuda, testing::ValuesIn(test::production_cases(guidance_step_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, GuidanceStepCuda, testing::ValuesIn(test::edge_cases(guidance_step_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Production, DenoiseBlendCuda, testing::ValuesIn(test::production_cases(denoise_blend_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Edge, DenoiseBlendCuda, testing::ValuesIn(test::edge_cases(denoise_blend_cases())),
                         test::case_name);
INSTANTIATE_TEST_SUITE_P(Cases, DenoiseBlendFlagCuda, testing::ValuesIn(flag_cases()), test::case_name);

#endif  // RTVD_HAS_CUDA

}  // namespace
}  // namespace rtvd
