// SDXL's text encoders and prompt embeddings (pipeline/sdxl_prompt_encoder.h) on the CPU:
// - against diffusers' StableDiffusionXLPipeline.encode_prompt on tests/data/tiny_sdxl (written by
//   tools/reference/export_tiny_sdxl_text.py; the test fails, naming the script, where that data is missing);
// - without reference data, on random-weight encoders of two different widths in an SDXL folder built here:
//   the context is each encoder's penultimate hidden state (checked through the SD path's clip skip 1, whose
//   final LayerNorm it lacks) side by side, each tokenizer's padding honoured, the pooled embedding is
//   text_projection of the final LayerNorm at the end-of-text token (checked through the SD path's last
//   hidden state), and no negative prompt gives zeros only with force_zeros_for_empty_prompt;
// - text_encoder_2's published config, and one line for each bad SDXL folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "pipeline/backends/backend.h"
#include "pipeline/model_files/clip_text_config.h"
#include "pipeline/model_files/diffusers_folder.h"
#include "pipeline/models/model.h"
#include "pipeline/sdxl_prompt_encoder.h"
#include "pipeline/text/clip_tokenizer.h"
#include "pipeline/text_encoder.h"
#include "support/golden.h"
#include "support/sdxl_folder.h"
#include "support/sdxl_text_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using testing::IsSubstring;

TEST(SdxlTextParity, TinySdxlMatchesDiffusers) {
  const std::string dir = test::tiny_sdxl_text_dir();
  if (dir.empty()) return;  // the failure names what is missing
  test::check_sdxl_text_cases(dir, [] { return make_cpu_backend(2); }, 1e-4, "cpu");
}

// stabilityai/stable-diffusion-xl-base-1.0, text_encoder_2/config.json as published.
constexpr const char* kSdxlTextEncoder2 = R"({
  "architectures": ["CLIPTextModelWithProjection"],
  "attention_dropout": 0.0,
  "bos_token_id": 0,
  "dropout": 0.0,
  "eos_token_id": 2,
  "hidden_act": "gelu",
  "hidden_size": 1280,
  "initializer_factor": 1.0,
  "initializer_range": 0.02,
  "intermediate_size": 5120,
  "layer_norm_eps": 1e-05,
  "max_position_embeddings": 77,
  "model_type": "clip_text_model",
  "num_attention_heads": 20,
  "num_hidden_layers": 32,
  "pad_token_id": 1,
  "projection_dim": 1280,
  "torch_dtype": "float16",
  "transformers_version": "4.32.0.dev0",
  "vocab_size": 49408
})";

TEST(SdxlTextConfig, PublishedTextEncoder2) {
  const ClipTextConfig c = parse_clip_text_config(kSdxlTextEncoder2, "text_encoder_2/config.json");
  EXPECT_EQ(c.hidden_size, 1280);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 20);
  EXPECT_EQ(c.intermediate_size, 5120);
  EXPECT_EQ(c.hidden_act, ClipTextConfig::HiddenAct::Gelu);
  EXPECT_EQ(c.projection_dim, 1280);
  // The same keys as a CLIPTextModel's: projection_dim is written, but there is no projection.
  json plain = json::parse(kSdxlTextEncoder2);
  plain["architectures"] = {"CLIPTextModel"};
  EXPECT_EQ(parse_clip_text_config(plain.dump(), "text_encoder/config.json").projection_dim, 0);
  // Left out, transformers' default.
  json no_dim = json::parse(kSdxlTextEncoder2);
  no_dim.erase("projection_dim");
  EXPECT_EQ(parse_clip_text_config(no_dim.dump(), "text_encoder_2/config.json").projection_dim, 512);
  json zero = json::parse(kSdxlTextEncoder2);
  zero["projection_dim"] = 0;
  EXPECT_PRED_FORMAT2(IsSubstring, "text_encoder_2/config.json: key 'projection_dim': expected",
                      error_of([&] { parse_clip_text_config(zero.dump(), "text_encoder_2/config.json"); }));
}

void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

// An SDXL diffusers folder: model_index.json as stabilityai/stable-diffusion-xl-base-1.0 publishes it, random
// text encoders of widths 16 (quick_gelu, 2 layers) and 24 (gelu, 3 layers, projection 20), CLIP's tokenizer
// padded with <|endoftext|> (tokenizer/) and "!" (tokenizer_2/), and stand-ins for the other components'
// files (open_diffusers_folder only finds them).
struct SdxlFolder {
  test::TempDir tmp{"rtvd_sdxl_text"};
  std::string dir = tmp.path("sdxl");
  ClipTextConfig first{49408, 16, 32, 2, 2, 77, ClipTextConfig::HiddenAct::QuickGelu, 1e-5f};
  ClipTextConfig second{49408, 24, 48, 3, 3, 77, ClipTextConfig::HiddenAct::Gelu, 1e-5f, 20};
  SdxlFolder() {
    test::write_sdxl_text_side(dir, first, second);
    fs::create_directories(dir + "/unet");
    fs::create_directories(dir + "/vae");
    fs::create_directories(dir + "/scheduler");
    std::ofstream(dir + "/unet/config.json") << "{}";
    std::ofstream(dir + "/unet/diffusion_pytorch_model.safetensors") << "not read";
    std::ofstream(dir + "/scheduler/scheduler_config.json") << "{}";
    write_json(dir + "/model_index.json", model_index());
  }
  static json model_index() { return test::sdxl_model_index(); }
  SdxlPromptEncoder encoder() const {
    return SdxlPromptEncoder(load_sdxl_text_encoders(open_diffusers_folder(dir)), [] { return make_cpu_backend(2); });
  }
  // The one-line error of opening the folder and building its prompt encoder.
  std::string error() const {
    return error_of([&] { encoder(); });
  }
};

// LayerNorm over each row of x (rows, c) with the checkpoint's weights `name`.weight and `name`.bias.
std::vector<float> layer_norm(const std::vector<float>& x, int c, const std::string& weights, const std::string& name) {
  const TextEncoderCheckpoint t = load_text_encoder_folder(weights);
  const std::vector<float> g = test::floats(*t.tensors.find(name + ".weight")), b = test::floats(*t.tensors.find(name + ".bias"));
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / c; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < c; ++i) mean += x[r * c + i];
    mean /= c;
    for (int i = 0; i < c; ++i) var += (x[r * c + i] - mean) * (x[r * c + i] - mean);
    const double rstd = 1.0 / std::sqrt(var / c + 1e-5);
    for (int i = 0; i < c; ++i) y[r * c + i] = float((x[r * c + i] - mean) * rstd * g[i] + b[i]);
  }
  return y;
}

// The SD path's output (TextEncoder with clip skip, through the final LayerNorm), which
// tests/text_encoder_test.cpp checks against transformers, for one prompt's ids.
std::vector<float> sd_hidden(const std::string& dir, const std::vector<int32_t>& ids, int clip_skip) {
  auto cpu = make_cpu_backend(2);
  TextEncoder e(dir, *cpu, clip_skip);
  return e.encode(ids, 1);
}

// Columns [from, from + n) of each of the rows of x (rows, width).
std::vector<float> columns(const std::vector<float>& x, int width, int from, int n) {
  std::vector<float> out;
  for (size_t r = 0; r < x.size() / width; ++r)
    out.insert(out.end(), x.begin() + r * width + from, x.begin() + r * width + from + n);
  return out;
}

TEST(SdxlPromptEncoderCpu, ContextIsBothPenultimateStatesAndPooledIsTheProjectedEndOfText) {
  const SdxlFolder f;
  SdxlPromptEncoder encoder = f.encoder();
  ASSERT_EQ(encoder.tokens(), 77);
  ASSERT_EQ(encoder.width(), 16 + 24);
  ASSERT_EQ(encoder.pooled_width(), 20);
  const int w1 = 16, w2 = 24;
  const std::string te1 = f.dir + "/text_encoder", te2 = f.dir + "/text_encoder_2";
  const ClipTokenizer tok1 = ClipTokenizer::load(f.dir + "/tokenizer"), tok2 = ClipTokenizer::load(f.dir + "/tokenizer_2");
  for (const std::string prompt : {"a watercolor fox", "Hello, World!! It's 4:30", ""}) {
    SCOPED_TRACE(prompt);
    const SdxlPromptEmbedding e = encoder.embed(prompt, "--prompt", nullptr);
    ASSERT_EQ(e.context.size(), size_t(77 * (w1 + w2)));
    ASSERT_EQ(e.pooled.size(), 20u);
    const std::vector<int32_t> ids1 = tok1.encode_context(prompt).ids, ids2 = tok2.encode_context(prompt).ids;
    EXPECT_EQ(ids1.back(), tok1.eos_id());  // the padding each tokenizer's files ask for
    EXPECT_EQ(ids2.back(), tok2.pad_id());
    EXPECT_EQ(tok2.pad_id(), 0);
    // Each encoder's columns, through the final LayerNorm the context leaves out, are the SD path's clip skip 1.
    const std::vector<float> part1 = columns(e.context, w1 + w2, 0, w1), part2 = columns(e.context, w1 + w2, w1, w2);
    EXPECT_LE(test::rel_l2(layer_norm(part1, w1, te1, "text_model.final_layer_norm"), sd_hidden(te1, ids1, 1)), 1e-5);
    EXPECT_LE(test::rel_l2(layer_norm(part2, w2, te2, "text_model.final_layer_norm"), sd_hidden(te2, ids2, 1)), 1e-5);
    // ... and not the normed one, nor with the other tokenizer's padding (the pad rows differ).
    EXPECT_GT(test::rel_l2(part1, sd_hidden(te1, ids1, 1)), 1e-2);
    EXPECT_GT(test::rel_l2(layer_norm(part2, w2, te2, "text_model.final_layer_norm"), sd_hidden(te2, ids1, 1)), 1e-3);
    // Pooled: text_projection (20, 24) of the last hidden state's final LayerNorm at the end-of-text token.
    const std::vector<float> last = sd_hidden(te2, ids2, 0);
    const size_t eos = std::find(ids2.begin(), ids2.end(), tok2.eos_id()) - ids2.begin();
    const TextEncoderCheckpoint t2 = load_text_encoder_folder(te2);
    const std::vector<float> proj = test::floats(*t2.tensors.find("text_projection.weight"));
    std::vector<float> want(20);
    for (int o = 0; o < 20; ++o) {
      double acc = 0;
      for (int i = 0; i < w2; ++i) acc += double(proj[o * w2 + i]) * last[eos * w2 + i];
      want[o] = float(acc);
    }
    EXPECT_LE(test::rel_l2(e.pooled, want), 1e-5);
  }
}

TEST(SdxlPromptEncoderCpu, NoNegativePromptIsZerosOnlyWithForceZeros) {
  SdxlFolder f;
  {
    SdxlPromptEncoder encoder = f.encoder();
    const SdxlPromptEmbedding none = encoder.embed_negative("", "--negative-prompt", nullptr);
    ASSERT_EQ(none.context.size(), size_t(77 * 40));
    ASSERT_EQ(none.pooled.size(), 20u);
    EXPECT_TRUE(std::all_of(none.context.begin(), none.context.end(), [](float v) { return v == 0.0f; }));
    EXPECT_TRUE(std::all_of(none.pooled.begin(), none.pooled.end(), [](float v) { return v == 0.0f; }));
    // A negative prompt given is encoded like a prompt.
    const SdxlPromptEmbedding ugly = encoder.embed_negative("ugly", "--negative-prompt", nullptr);
    EXPECT_EQ(ugly.context, encoder.embed("ugly", "--prompt", nullptr).context);
    EXPECT_EQ(ugly.pooled, encoder.embed("ugly", "--prompt", nullptr).pooled);
  }
  json index = SdxlFolder::model_index();
  index["force_zeros_for_empty_prompt"] = false;
  write_json(f.dir + "/model_index.json", index);
  SdxlPromptEncoder encoder = f.encoder();
  const SdxlPromptEmbedding empty = encoder.embed_negative("", "--negative-prompt", nullptr);
  EXPECT_EQ(empty.context, encoder.embed("", "--prompt", nullptr).context);
  EXPECT_EQ(empty.pooled, encoder.embed("", "--prompt", nullptr).pooled);
  EXPECT_GT(test::rel_l2(empty.pooled, std::vector<float>(20, 0.0f)), 0.5);
}

TEST(SdxlPromptEncoderCpu, LongPromptIsCutWithANotice) {
  const SdxlFolder f;
  SdxlPromptEncoder encoder = f.encoder();
  std::string prompt, notice;
  for (int i = 0; i < 20; ++i) prompt += "a red fox in the snow ";
  const SdxlPromptEmbedding e = encoder.embed(prompt, "--prompt", &notice);
  EXPECT_EQ(notice, "note: --prompt is 120 tokens long; the last 45 were dropped (the text encoder takes 75)");
  EXPECT_TRUE(test::all_finite(e.context));
  encoder.embed("a fox", "--prompt", &notice);
  EXPECT_EQ(notice, "");
}

TEST(SdxlPromptEncoderCpu, Fp16VariantWeights) {
  const SdxlFolder f;
  fs::rename(f.dir + "/text_encoder_2/model.safetensors", f.dir + "/text_encoder_2/model.fp16.safetensors");
  EXPECT_EQ(f.encoder().pooled_width(), 20);
}

bool one_line(const std::string& s) { return s.find('\n') == std::string::npos && s != "<no error thrown>"; }

TEST(SdxlTextErrors, OneLineNamingWhatIsMissingOrWrong) {
  const auto with_index = [](const SdxlFolder& f, const std::function<void(json&)>& change) {
    json index = SdxlFolder::model_index();
    change(index);
    write_json(f.dir + "/model_index.json", index);
    return f.error();
  };
  {
    const SdxlFolder f;
    for (const char* component : {"text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"}) {
      const std::string e = with_index(f, [&](json& j) { j[component] = {nullptr, nullptr}; });
      EXPECT_TRUE(one_line(e)) << e;
      EXPECT_PRED_FORMAT2(IsSubstring, cat("model_index.json: key '", component, "': an SDXL pipeline needs both "
                                           "text encoders and both tokenizers"), e);
      EXPECT_PRED_FORMAT2(IsSubstring, cat("this one lists no ", component), e);
      EXPECT_EQ(with_index(f, [&](json& j) { j.erase(component); }), e);
    }
  }
  {
    const SdxlFolder f;
    const std::string e = with_index(f, [](json& j) {
      j["_class_name"] = "StableDiffusionXLImg2ImgPipeline";
      j["requires_aesthetics_score"] = true;
      j["text_encoder"] = j["tokenizer"] = {nullptr, nullptr};
    });
    EXPECT_TRUE(one_line(e)) << e;
    EXPECT_PRED_FORMAT2(IsSubstring, "model_index.json: key 'requires_aesthetics_score': expected false (true is "
                        "SDXL's refiner", e);
  }
  for (const char* component : {"text_encoder_2", "tokenizer_2"}) {
    const SdxlFolder f;
    fs::remove_all(f.dir + "/" + component);
    const std::string e = f.error();
    EXPECT_TRUE(one_line(e)) << e;
    EXPECT_PRED_FORMAT2(IsSubstring, cat("model_index.json: key '", component, "': the pipeline lists this "
                                         "component, but its folder ", f.dir, "/", component, " is missing"), e);
  }
  {
    const SdxlFolder f;
    fs::remove(f.dir + "/text_encoder_2/model.safetensors");
    const std::string e = f.error();
    EXPECT_TRUE(one_line(e)) << e;
    EXPECT_PRED_FORMAT2(IsSubstring, cat(f.dir, "/text_encoder_2: expected model.safetensors"), e);
  }
  {
    const SdxlFolder f;  // a CLIPTextModel where SDXL needs the projection
    json config = json::parse(std::ifstream(f.dir + "/text_encoder_2/config.json"));
    config["architectures"] = {"CLIPTextModel"};
    write_json(f.dir + "/text_encoder_2/config.json", config);
    const std::string e = f.error();
    EXPECT_TRUE(one_line(e)) << e;
    EXPECT_PRED_FORMAT2(IsSubstring, cat(f.dir, "/text_encoder_2/model.safetensors: the pooled text embedding needs "
                                         "a CLIPTextModelWithProjection"), e);
  }
  {
    const SdxlFolder f;  // the projection's weight left out
    const TextEncoderCheckpoint full = load_text_encoder_folder(f.dir + "/text_encoder_2");
    std::vector<TensorToWrite> kept;
    for (const TensorView& t : full.tensors.tensors())
      if (t.name != "text_projection.weight") kept.push_back({t.name, t.dtype, t.shape, {t.data, t.data + t.bytes}});
    write_safetensors(f.dir + "/text_encoder_2/model.safetensors.tmp", kept);
    fs::rename(f.dir + "/text_encoder_2/model.safetensors.tmp", f.dir + "/text_encoder_2/model.safetensors");
    const std::string e = f.error();
    EXPECT_TRUE(one_line(e)) << e;
    EXPECT_PRED_FORMAT2(IsSubstring, "text_projection.weight", e);
  }
}

}  // namespace
}  // namespace rtvd
