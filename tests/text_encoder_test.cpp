// The CLIP text encoder on the CPU (fp32) against transformers: scaled-down CLIPTextModels with both
// activations (quick_gelu as SD 1.x, gelu as SD 2.x), written by transformers' save_pretrained with fp16
// weights, and their hidden states from transformers in fp32 (tools/reference/export_clip_text.py), with
// clip skip 0, 1 and 2. Then what a bad text encoder folder gets.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>

#include "pipeline/backends/backend.h"
#include "pipeline/text_encoder.h"
#include "support/clip_text_expected.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

class TextEncoderCpu : public ::testing::TestWithParam<const char*> {};

TEST_P(TextEncoderCpu, MatchesTransformersWithClipSkip) {
  const std::string dir = test::test_data(std::string("clip_text/") + GetParam());
  const test::ClipTextExpected e = test::read_clip_text_expected(dir + "/expected.safetensors");
  auto cpu = make_cpu_backend(2);
  for (int skip : {0, 1, 2}) {
    TextEncoder encoder(dir + "/text_encoder", *cpu, skip);
    const std::vector<float> hidden = encoder.encode(e.ids, e.batch);
    const std::vector<float>& want = e.hidden[skip];
    ASSERT_EQ(hidden.size(), want.size());
    EXPECT_LE(test::rel_l2(hidden, want), 1e-4) << GetParam() << " clip skip " << skip;
  }
}

INSTANTIATE_TEST_SUITE_P(Small, TextEncoderCpu, ::testing::Values("small_quick_gelu", "small_gelu"));

// A copy of the small encoder's folder with config.json replaced, or the weights file renamed.
struct BrokenFolder {
  test::TempDir tmp{"rtvd_text"};
  std::string dir = tmp.path("text_encoder");
  BrokenFolder() {
    std::filesystem::copy(test::test_data("clip_text/small_gelu/text_encoder"), dir);
  }
  void config(const std::string& text) { std::ofstream(dir + "/config.json") << text; }
};

// fn throws rtvd::Error whose message holds every one of parts.
template <class F>
void expect_error(F&& fn, std::initializer_list<const char*> parts) {
  const std::string message = test::error_of(fn);
  for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST(TextEncoderErrors, NameTheFileAndWhatWasExpected) {
  auto cpu = make_cpu_backend(1);
  {
    BrokenFolder f;
    f.config(R"({"vocab_size": 512, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
                 "num_attention_heads": 2, "max_position_embeddings": 77, "hidden_act": "relu"})");
    expect_error([&] { TextEncoder(f.dir, *cpu); }, {"config.json", "hidden_act"});
  }
  {
    BrokenFolder f;
    f.config(R"({"vocab_size": 512, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
                 "num_attention_heads": 3, "max_position_embeddings": 77, "hidden_act": "gelu"})");
    expect_error([&] { TextEncoder(f.dir, *cpu); }, {"num_attention_heads"});
  }
  {
    BrokenFolder f;
    f.config(R"({"vocab_size": 512, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
                 "num_attention_heads": 2, "max_position_embeddings": 77, "hidden_act": "gelu", "rope": 1})");
    expect_error([&] { TextEncoder(f.dir, *cpu); }, {"'rope'"});
  }
  {
    BrokenFolder f;  // a layer more in the config than in the weights
    f.config(R"({"vocab_size": 512, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 4,
                 "num_attention_heads": 2, "max_position_embeddings": 77, "hidden_act": "gelu"})");
    expect_error([&] { TextEncoder(f.dir, *cpu); }, {"encoder.layers.3"});
  }
  {
    BrokenFolder f;  // a layer fewer: the last layer's tensors are unexpected
    f.config(R"({"vocab_size": 512, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2,
                 "num_attention_heads": 2, "max_position_embeddings": 77, "hidden_act": "gelu"})");
    expect_error([&] { TextEncoder(f.dir, *cpu); }, {"unexpected tensor", "encoder.layers.2"});
  }
  {
    BrokenFolder f;
    std::filesystem::rename(f.dir + "/model.safetensors", f.dir + "/pytorch_model.bin");
    expect_error([&] { TextEncoder(f.dir, *cpu); }, {"pickle"});
  }
  {
    BrokenFolder f;
    expect_error([&] { TextEncoder(f.dir, *cpu, 3); }, {"--clip-skip 3"});
    TextEncoder encoder(f.dir, *cpu);
    std::vector<int32_t> ids(77, 5);
    ids[10] = 512;
    expect_error([&] { encoder.encode(ids, 1); }, {"token id 512"});
  }
}

}  // namespace
}  // namespace rtvd
