// Prompts end to end on the CPU, from a diffusers folder that diffusers itself wrote (tests/data/tiny_sd,
// tools/reference/export_tiny_sd.py): the tokenizer and text encoder from the folder against diffusers'
// StableDiffusionPipeline.encode_prompt (tests/data/tiny_sd_prompts.safetensors), then what the engine does
// with them: the context reaches the U-Net, prompt travel, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "pipeline/engine.h"
#include "pipeline/prompt_encoder.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

std::vector<float> expected(const std::string& name) {
  const SafeTensorsFile f = SafeTensorsFile::open(test::test_data("tiny_sd_prompts.safetensors"));
  const TensorView* t = f.find(name);
  if (!t || t->dtype != DType::F32) throw Error("tiny_sd_prompts.safetensors: no F32 " + name);
  std::vector<float> v(size_t(t->numel()));
  std::memcpy(v.data(), t->data, t->bytes);
  return v;
}

// export_tiny_sd.py's PROMPTS, in its order.
const char* const kPrompts[][2] = {
    {"a watercolor fox", ""},
    {"Hello, World!! It's 4:30 -- café?", "blurry, low quality"},
    {nullptr, "ugly"},  // "a red fox in the snow" 20 times: 120 tokens
    {"", ""},
};

std::string long_prompt() {
  std::string s;
  for (int i = 0; i < 20; ++i) s += i ? " a red fox in the snow" : "a red fox in the snow";
  return s;
}

PromptEncoder tiny_encoder(int clip_skip) {
  const std::string dir = test::test_data("tiny_sd");
  return PromptEncoder(load_text_encoder_folder(dir + "/text_encoder"), dir + "/tokenizer", "", make_cpu_backend(2), clip_skip);
}

TEST(PromptEncoder, MatchesDiffusersEncodePrompt) {
  PromptEncoder encoder = tiny_encoder(0);
  PromptEncoder skip1 = tiny_encoder(1);
  for (int i = 0; i < 4; ++i) {
    const std::string prompt = kPrompts[i][0] ? kPrompts[i][0] : long_prompt();
    SCOPED_TRACE(prompt);
    std::string notice;
    EXPECT_LE(test::rel_l2(encoder.embed(prompt, "--prompt", &notice), expected(cat("prompt_", i))), 1e-4);
    if (i == 2) {  // 5 words of 6 tokens with BOS and EOS ... 120 tokens, 75 kept
      EXPECT_EQ(notice, "note: --prompt is 120 tokens long; the last 45 were dropped (the text encoder takes 75)");
    } else {
      EXPECT_EQ(notice, "");
    }
    EXPECT_LE(test::rel_l2(encoder.embed(kPrompts[i][1], "--negative-prompt", nullptr), expected(cat("negative_", i))), 1e-4);
    EXPECT_LE(test::rel_l2(skip1.embed(prompt, "--prompt", nullptr), expected(cat("skip1_", i))), 1e-4);
  }
}

TEST(Slerp, EndsAreTheInputsAndTheArcKeepsTheLength) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<float> a = rng.normal_vector(1000);
  std::vector<float> b = rng.normal_vector(1000);
  EXPECT_LE(test::max_abs_diff(slerp(a, b, 0.0f), a), 1e-5);
  EXPECT_LE(test::max_abs_diff(slerp(a, b, 1.0f), b), 1e-5);
  const auto norm = [](const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s);
  };
  const double scale = norm(a) / norm(b);
  for (float& x : b) x = float(x * scale);  // of a's length
  // Two random vectors of 1000 dims are nearly orthogonal: the arc's midpoint keeps their length, where the
  // straight line's has about 1/sqrt(2) of it, and points along their bisector.
  const std::vector<float> mid = slerp(a, b, 0.5f);
  EXPECT_NEAR(norm(mid), norm(a), 1e-3 * norm(a));
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += double(mid[i]) * a[i], mb += double(mid[i]) * b[i];
  EXPECT_NEAR(ma, mb, 1e-4 * norm(a) * norm(mid));
  // Parallel vectors: the straight line.
  std::vector<float> twice(a);
  for (float& x : twice) x *= 2;
  EXPECT_LE(test::max_abs_diff(slerp(a, twice, 0.5f), [&] { auto v = a; for (float& x : v) x *= 1.5f; return v; }()), 1e-4);
}

EngineOptions tiny_sd_options() {
  EngineOptions o;
  o.model.path = test::test_data("tiny_sd");
  o.device = DeviceKind::Cpu;
  o.threads = 2;
  return o;
}

std::vector<uint8_t> frame(Engine& e) { return e.render(nullptr).pixels; }

TEST(EnginePrompts, ThePromptReachesTheFrameAndTravelEndsAtTheSecondPrompt) {
  FrameSettings s;
  s.steps = 2;
  s.blend = 0.0f;  // no history: a frame depends on its own context alone
  auto render = [&](const PromptSettings& p, int frames) {
    Engine e(tiny_sd_options());
    e.set_prompts(p);
    e.configure(s, false);
    std::vector<std::vector<uint8_t>> out;
    for (int i = 0; i < frames; ++i) out.push_back(frame(e));
    return out;
  };
  PromptSettings fox, owl, travel, negative;
  fox.prompt = "a watercolor fox";
  owl.prompt = "an owl at night, oil painting";
  travel = fox;
  travel.prompt_to = owl.prompt;
  travel.travel_frames = 2;
  negative = fox;
  negative.negative_prompt = "blurry";
  const auto a = render(fox, 3), b = render(owl, 3), t = render(travel, 3), n = render(negative, 1);
  EXPECT_EQ(render(fox, 1)[0], a[0]);  // deterministic
  EXPECT_NE(a[0], b[0]);               // the prompt changes the frame
  EXPECT_NE(a[0], n[0]);               // and so does the negative prompt, with guidance
  EXPECT_EQ(t[0], a[0]);               // travel starts at --prompt,
  EXPECT_NE(t[1], a[1]);               // is between them midway,
  EXPECT_NE(t[1], b[1]);
  EXPECT_EQ(t[2], b[2]);               // and has arrived after --travel-frames frames

  // Without guidance the negative prompt is not used: batch 1.
  s.guidance = 1.0f;
  EXPECT_EQ(render(fox, 1)[0], render(negative, 1)[0]);
}

TEST(EnginePrompts, PromptsAreRefusedWithoutATextEncoder) {
  EngineOptions o;  // the embedded default model: class-conditional
  o.device = DeviceKind::Cpu;
  o.threads = 1;
  Engine e(o);
  PromptSettings p;
  p.prompt = "a fox";
  EXPECT_EQ(test::error_of([&] { e.set_prompts(p); }),
            "--prompt: this model has no text encoder (embedded default model is class-conditional: choose with --class)");
  o.clip_skip = 1;
  EXPECT_EQ(test::error_of([&] { Engine{o}; }), "--clip-skip 1: this model has no text encoder");
  PromptEncoder encoder = tiny_encoder(0);
  EXPECT_EQ(test::error_of([&] { encoder.embed(std::string(20000, 'a'), "--prompt", nullptr); }),
            "--prompt: 20000 bytes, expected at most 16384 (the text encoder reads 75 tokens)");
  EXPECT_NE(test::error_of([&] { encoder.embed("caf\xc3", "--prompt", nullptr); }).find("not valid UTF-8"), std::string::npos);
  EngineOptions tiny = tiny_sd_options();
  tiny.clip_skip = 2;  // the tiny encoder has 2 layers
  EXPECT_NE(test::error_of([&] { Engine{tiny}; }).find("--clip-skip 2: expected 0 to 1"), std::string::npos);
}

}  // namespace
}  // namespace rtvd
