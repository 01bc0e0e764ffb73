#include "support/sdxl_text_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "base/error.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/sdxl_prompt_encoder.h"
#include "pipeline/text/clip_tokenizer.h"
#include "support/test_util.h"

namespace rtvd::test {

std::string tiny_sdxl_text_dir() {
  const std::string dir = test_data("tiny_sdxl");
  for (const char* file : {"text_reference.safetensors", "text_encoder/config.json", "text_encoder_2/config.json",
                           "tokenizer/vocab.json", "tokenizer_2/vocab.json"})
    if (!std::filesystem::exists(dir + "/" + file)) {
      ADD_FAILURE() << dir << "/" << file << " is missing: run tools/reference/export_tiny_sdxl_text.py (its "
                    << "docstring says how) into tests/data/tiny_sdxl and commit what it writes";
      return "";
    }
  return dir;
}

std::vector<SdxlTextCase> read_sdxl_text_reference(const std::string& path) {
  const SafeTensorsFile file = SafeTensorsFile::open(path);
  const auto& meta = file.metadata();
  const auto text = [&](const std::string& key) -> const std::string* {
    const auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  };
  const auto copy = [&](const std::string& name, DType dtype, auto& out) {
    const TensorView* t = file.find(name);
    if (!t || t->dtype != dtype) fail(path, ": no ", dtype_name(dtype), " tensor ", name);
    out.resize(size_t(t->numel()));
    std::memcpy(out.data(), t->data, t->bytes);
  };
  if (!text("cases")) fail(path, ": no metadata 'cases'");
  std::vector<SdxlTextCase> cases;
  for (int i = 0, n = std::stoi(*text("cases")); i < n; ++i) {
    SdxlTextCase c;
    c.name = cat("case", i);
    const std::string p = c.name + ".";
    if (!text(p + "prompt") || !text(p + "force_zeros_for_empty_prompt")) fail(path, ": ", c.name, "'s metadata missing");
    c.prompt = *text(p + "prompt");
    if (const std::string* negative = text(p + "negative_prompt")) c.negative_prompt = *negative;
    c.force_zeros_for_empty_prompt = *text(p + "force_zeros_for_empty_prompt") == "true";
    copy(p + "input_ids", DType::I32, c.ids);
    copy(p + "input_ids_2", DType::I32, c.ids_2);
    copy(p + "prompt_embeds", DType::F32, c.prompt_embeds);
    copy(p + "pooled_prompt_embeds", DType::F32, c.pooled);
    copy(p + "negative_prompt_embeds", DType::F32, c.negative_prompt_embeds);
    copy(p + "negative_pooled_prompt_embeds", DType::F32, c.negative_pooled);
    cases.push_back(std::move(c));
  }
  return cases;
}

namespace {

// rel_l2, or for an all-zero reference whether a is all zero too (0, else +inf).
double error(const std::vector<float>& a, const std::vector<float>& want) {
  if (std::all_of(want.begin(), want.end(), [](float v) { return v == 0.0f; }))
    return a.size() == want.size() && std::all_of(a.begin(), a.end(), [](float v) { return v == 0.0f; }) ? 0.0 : 1e30;
  return rel_l2(a, want);
}

}  // namespace

double check_sdxl_text_cases(const std::string& dir, const std::function<std::unique_ptr<Backend>()>& make_backend,
                             double max_rel_l2, const std::string& label) {
  const std::vector<SdxlTextCase> cases = read_sdxl_text_reference(dir + "/text_reference.safetensors");
  EXPECT_GE(cases.size(), 4u);
  const ClipTokenizer tokenizer = ClipTokenizer::load(dir + "/tokenizer");
  const ClipTokenizer tokenizer_2 = ClipTokenizer::load(dir + "/tokenizer_2");
  double worst = 0;
  for (const SdxlTextCase& c : cases) {
    SCOPED_TRACE(label + " " + c.name + " \"" + c.prompt + "\"");
    EXPECT_EQ(tokenizer.encode_context(c.prompt).ids, c.ids);
    EXPECT_EQ(tokenizer_2.encode_context(c.prompt).ids, c.ids_2);
    SdxlTextEncoders parts{load_text_encoder_folder(dir + "/text_encoder"),
                           load_text_encoder_folder(dir + "/text_encoder_2"), dir + "/tokenizer", dir + "/tokenizer_2",
                           c.force_zeros_for_empty_prompt};
    SdxlPromptEncoder encoder(std::move(parts), make_backend);
    const SdxlPromptEmbedding e = encoder.embed(c.prompt, "--prompt", nullptr);
    // rtvd has one spelling of "no negative prompt", the empty one: diffusers' None.
    const SdxlPromptEmbedding n = encoder.embed_negative(c.negative_prompt.value_or(""), "--negative-prompt", nullptr);
    for (const auto& [what, got, want] : {std::tuple{"prompt_embeds", &e.context, &c.prompt_embeds},
                                          std::tuple{"pooled_prompt_embeds", &e.pooled, &c.pooled},
                                          std::tuple{"negative_prompt_embeds", &n.context, &c.negative_prompt_embeds},
                                          std::tuple{"negative_pooled_prompt_embeds", &n.pooled, &c.negative_pooled}}) {
      EXPECT_EQ(got->size(), want->size()) << what;
      const double err = error(*got, *want);
      std::printf("sdxl text %s %s %s: rel_l2 %.3g\n", label.c_str(), c.name.c_str(), what, err);
      EXPECT_LE(err, max_rel_l2) << what;
      worst = std::max(worst, err);
    }
  }
  return worst;
}

}  // namespace rtvd::test
