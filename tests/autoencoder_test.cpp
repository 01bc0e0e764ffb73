// The SD autoencoders on the CPU (fp32) against diffusers: the tiny AutoencoderKL of tests/data/tiny_sd/vae and
// a 16-channel AutoencoderTiny (tests/data/tiny_taesd), both written by diffusers' save_pretrained with fp16
// weights, and diffusers' fp32 encode and decode of random inputs on them
// (tools/reference/export_sd_references.py, tests/data/tiny_sd_autoencoders.safetensors): relative L2 <= 1e-4.
// Then their configs (the published ones, and one clear line for each bad key), their parameter lists, and
// the full-size SD VAE and TAESD graphs at 512x512.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <map>
#include <set>

#include "pipeline/backends/backend.h"
#include "pipeline/model_files/autoencoder_config.h"
#include "pipeline/models/autoencoder.h"
#include "support/autoencoder_reference.h"
#include "support/model_configs.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr double kTolerance = 1e-4;

// ---------------------------------------------------------------------------------------------------
// Against diffusers

class AutoencoderCpu : public testing::TestWithParam<const char*> {};

TEST_P(AutoencoderCpu, MatchesDiffusers) {
  const test::AutoencoderReference ref(GetParam());
  auto cpu = make_cpu_backend(2);
  const test::AutoencoderOutputs out = test::run_autoencoder(*cpu, ref, ref.config, ref.weights());
  const double encode_err = test::rel_l2(out.latent, test::scaled(ref.mean, ref.config.latent()));
  const double decode_err = test::rel_l2(out.image, ref.decoded);
  std::printf("%s on the CPU: encode rel_l2 %.3g, decode rel_l2 %.3g\n", GetParam(), encode_err, decode_err);
  EXPECT_LE(encode_err, kTolerance) << "encode";
  EXPECT_LE(decode_err, kTolerance) << "decode";
}

INSTANTIATE_TEST_SUITE_P(Tiny, AutoencoderCpu, testing::Values("vae", "taesd"));

// Another scaling factor and a shift fold into the same convs: the encoder's latent is (mean - shift) * scale,
// and decode unscales the sampler's latent (post_quant_conv's bias takes the shift through W shift; TAESD's clamp
// takes both).
TEST_P(AutoencoderCpu, FoldsAnyLatentScaling) {
  const test::AutoencoderReference ref(GetParam());
  AutoencoderConfig cfg = ref.config;
  std::visit([](auto& m) { m.latent.scaling_factor = 0.37f, m.latent.shift_factor = -0.21f; }, cfg.model);
  auto cpu = make_cpu_backend(2);
  const test::AutoencoderOutputs out = test::run_autoencoder(*cpu, ref, cfg, ref.weights());
  EXPECT_LE(test::rel_l2(out.latent, test::scaled(ref.mean, cfg.latent())), kTolerance) << "encode";
  EXPECT_LE(test::rel_l2(out.image, ref.decoded), kTolerance) << "decode";
}

// Older VAE checkpoints (and single files converted by diffusers' scripts) keep the mid-block attention's
// projections as 1x1 convs (C, C, 1, 1): the same matrices, the same outputs, bit for bit.
TEST(AutoencoderKLCpu, TakesAttentionProjectionsAsOneByOneConvs) {
  const test::AutoencoderReference ref("vae");
  const SafeTensorsFile original = ref.weights();
  std::vector<TensorSpec> specs;
  int reshaped = 0;
  for (const TensorView& t : original.tensors()) {
    TensorSpec s{t.name, t.dtype, t.shape};
    if (t.name.find(".attentions.0.to_") != std::string::npos && t.shape.size() == 2) {
      s.shape = {t.shape[0], t.shape[1], 1, 1};
      ++reshaped;
    }
    specs.push_back(s);
  }
  EXPECT_EQ(reshaped, 8);  // to_q, to_k, to_v, to_out.0 of the encoder's and the decoder's mid block
  const SafeTensorsFile convs = SafeTensorsFile::build("conv projections", specs, [&](size_t i, uint8_t* data) {
    std::memcpy(data, original.tensors()[i].data, original.tensors()[i].bytes);
  });
  auto cpu = make_cpu_backend(2);
  const test::AutoencoderOutputs a = test::run_autoencoder(*cpu, ref, ref.config, ref.weights());
  const test::AutoencoderOutputs b = test::run_autoencoder(*cpu, ref, ref.config, convs);
  EXPECT_EQ(test::max_abs_diff(a.latent, b.latent), 0.0);
  EXPECT_EQ(test::max_abs_diff(a.image, b.image), 0.0);
}

// ---------------------------------------------------------------------------------------------------
// Configs

// SD 1.x/2.x's vae/config.json (AutoencoderKL) and madebyollin/taesd's (AutoencoderTiny), as published.
constexpr const char* kSdVaeConfig = R"({
  "_class_name": "AutoencoderKL", "_diffusers_version": "0.6.0", "act_fn": "silu",
  "block_out_channels": [128, 256, 512, 512],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
  "in_channels": 3, "latent_channels": 4, "layers_per_block": 2, "norm_num_groups": 32, "out_channels": 3,
  "sample_size": 512,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"]})";
constexpr const char* kTaesdConfig = R"({
  "_class_name": "AutoencoderTiny", "_diffusers_version": "0.20.0.dev0", "act_fn": "relu",
  "decoder_block_out_channels": [64, 64, 64, 64], "encoder_block_out_channels": [64, 64, 64, 64],
  "force_upcast": false, "in_channels": 3, "latent_channels": 4, "latent_magnitude": 3, "latent_shift": 0.5,
  "num_decoder_blocks": [3, 3, 3, 1], "num_encoder_blocks": [1, 3, 3, 3], "out_channels": 3,
  "scaling_factor": 1.0, "upsampling_scaling_factor": 2})";

TEST(AutoencoderConfigs, PublishedAndCommitted) {
  const AutoencoderConfig sd = parse_autoencoder_config(kSdVaeConfig, "sd/vae/config.json");
  ASSERT_FALSE(sd.tiny());
  const auto& kl = std::get<AutoencoderKLConfig>(sd.model);
  EXPECT_EQ(kl.block_out_channels, (std::vector<int>{128, 256, 512, 512}));
  EXPECT_EQ(kl.layers_per_block, 2);
  EXPECT_EQ(kl.norm_num_groups, 32);
  EXPECT_TRUE(kl.mid_block_attention && kl.use_quant_conv && kl.use_post_quant_conv);
  EXPECT_TRUE(sd.force_upcast());  // diffusers' default
  EXPECT_EQ(sd.latent().channels, 4);
  EXPECT_EQ(sd.latent().pixels_per_latent, 8);
  EXPECT_FLOAT_EQ(sd.latent().scaling_factor, 0.18215f);
  EXPECT_EQ(sd.latent().shift_factor, 0.0f);

  const AutoencoderConfig taesd = parse_autoencoder_config(kTaesdConfig, "taesd/config.json");
  ASSERT_TRUE(taesd.tiny());
  const auto& tiny = std::get<AutoencoderTinyConfig>(taesd.model);
  EXPECT_EQ(tiny.num_encoder_blocks, (std::vector<int>{1, 3, 3, 3}));
  EXPECT_EQ(tiny.num_decoder_blocks, (std::vector<int>{3, 3, 3, 1}));
  EXPECT_EQ(tiny.encoder_block_out_channels, (std::vector<int>{64, 64, 64, 64}));
  EXPECT_FLOAT_EQ(tiny.latent_magnitude, 3.0f);
  EXPECT_FLOAT_EQ(tiny.latent_shift, 0.5f);
  EXPECT_FALSE(taesd.force_upcast());
  EXPECT_EQ(taesd.latent().pixels_per_latent, 8);
  EXPECT_EQ(taesd.latent().scaling_factor, 1.0f);

  // The tiny VAE of tests/data/tiny_sd has 2 levels: a latent covers 2x2 pixels.
  const AutoencoderConfig committed = load_autoencoder_config(test::test_data("tiny_sd/vae/config.json"));
  EXPECT_EQ(std::get<AutoencoderKLConfig>(committed.model).block_out_channels, (std::vector<int>{32, 64}));
  EXPECT_EQ(committed.latent().pixels_per_latent, 2);
  EXPECT_EQ(std::get<AutoencoderKLConfig>(committed.model).norm_num_groups, 8);
  EXPECT_TRUE(committed.force_upcast());
}

// Each bad config is refused with one line naming the file and the key.
TEST(AutoencoderConfigs, BadKeysAreNamed) {
  struct Bad {
    std::string json;
    std::vector<const char*> parts;
  };
  const auto sd = [](const std::string& extra) {
    std::string j = kSdVaeConfig;
    return j.substr(0, j.size() - 1) + ", " + extra + "}";
  };
  const auto taesd = [](const std::string& extra) {
    std::string j = kTaesdConfig;
    return j.substr(0, j.size() - 1) + ", " + extra + "}";
  };
  const std::vector<Bad> bad = {
      {sd(R"("spatial_norm": 1)"), {"vae.json: key 'spatial_norm'", "an unknown key"}},
      {R"({"_class_name": "VQModel"})", {"vae.json: key '_class_name'", "\"AutoencoderKL\" or \"AutoencoderTiny\""}},
      {R"({"block_out_channels": [64]})", {"vae.json: key '_class_name'", "required"}},
      {R"({"_class_name": "AutoencoderKL", "act_fn": "gelu"})", {"vae.json: key 'act_fn'", "another activation"}},
      {R"({"_class_name": "AutoencoderKL", "in_channels": 4})", {"vae.json: key 'in_channels'", "3 channels"}},
      {R"({"_class_name": "AutoencoderKL", "latents_mean": [0.1, 0.2, 0.3, 0.4]})", {"vae.json: key 'latents_mean'"}},
      {R"({"_class_name": "AutoencoderKL", "block_out_channels": [64, 80], "norm_num_groups": 32,
           "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
           "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"]})",
       {"vae.json: key 'norm_num_groups'", "a divisor of every block_out_channels entry (80)"}},
      {R"({"_class_name": "AutoencoderKL", "block_out_channels": [64, 64]})",
       {"vae.json: key 'down_block_types'", "2 times \"DownEncoderBlock2D\""}},
      {R"({"_class_name": "AutoencoderKL", "down_block_types": ["AttnDownEncoderBlock2D"]})",
       {"vae.json: key 'down_block_types'"}},
      {R"({"_class_name": "AutoencoderKL", "block_out_channels": [0]})", {"vae.json: key 'block_out_channels'"}},
      {R"({"_class_name": "AutoencoderKL", "layers_per_block": 100})", {"vae.json: key 'layers_per_block'", "[1, 8]"}},
      {R"({"_class_name": "AutoencoderKL", "scaling_factor": 0})", {"vae.json: key 'scaling_factor'", "positive"}},
      {R"({"_class_name": "AutoencoderKL", "shift_factor": "x"})", {"vae.json: key 'shift_factor'", "a number"}},
      {R"({"_class_name": "AutoencoderKL", "force_upcast": 1})", {"vae.json: key 'force_upcast'", "true or false"}},
      {R"({"_class_name": "AutoencoderKL", "sample_size": [512, 512, 3]})", {"vae.json: key 'sample_size'"}},
      {taesd(R"("upsample_fn": "bilinear")"), {"vae.json: key 'upsample_fn'", "another upsampling"}},
      {taesd(R"("block_out_channels": [32, 32, 32, 32])"), {"vae.json: key 'block_out_channels'"}},
      {R"({"_class_name": "AutoencoderTiny", "encoder_block_out_channels": [64, 32, 32, 32]})",
       {"vae.json: key 'encoder_block_out_channels'", "the same width at every level"}},
      {R"({"_class_name": "AutoencoderTiny", "num_encoder_blocks": [1, 3, 3]})",
       {"vae.json: key 'num_encoder_blocks'", "4 entries"}},
      {R"({"_class_name": "AutoencoderTiny", "encoder_block_out_channels": [64, 64], "num_encoder_blocks": [1, 3]})",
       {"vae.json: key 'decoder_block_out_channels'", "2 levels, as the encoder"}},
      {R"({"_class_name": "AutoencoderTiny", "num_decoder_blocks": [3, 3, 3, 17]})",
       {"vae.json: key 'num_decoder_blocks'", "[0, 16]"}},
      {R"({"_class_name": "AutoencoderTiny", "latent_magnitude": -3})", {"vae.json: key 'latent_magnitude'"}},
  };
  for (const Bad& b : bad) {
    const std::string message = test::error_of([&] { parse_autoencoder_config(b.json, "vae.json"); });
    for (const char* part : b.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------------------
// Parameters and graphs

// The parameter lists name exactly the tensors diffusers' save_pretrained wrote, with their shapes.
TEST(AutoencoderParameters, AreTheCommittedCheckpoints) {
  for (const char* kind : {"vae", "taesd"}) {
    SCOPED_TRACE(kind);
    const test::AutoencoderReference ref(kind);
    const SafeTensorsFile file = ref.weights();
    std::map<std::string, std::vector<int64_t>> listed, saved;
    for (const TensorSpec& s : autoencoder_parameters(ref.config, DType::F16)) listed[s.name] = s.shape;
    for (const TensorView& t : file.tensors()) saved[t.name] = t.shape;
    EXPECT_EQ(listed, saved);
  }
}

// The SD VAE: 83,653,863 parameters in diffusers' AutoencoderKL of SD 1.x/2.x (248 tensors).
TEST(AutoencoderParameters, SdVaeCount) {
  const auto specs = autoencoder_parameters(parse_autoencoder_config(kSdVaeConfig, "sd"), DType::F16);
  EXPECT_EQ(specs.size(), 248u);
  EXPECT_EQ(test::parameter_count(specs), 83'653'863);
}

// A graph of encode at 512x512 and decode of its 64x64 latent on a checkpoint of zeros that are never touched:
// building reads shapes, not values.
struct FullSizeGraph {
  AutoencoderConfig cfg;
  std::unique_ptr<WeightStore> weights;
  Graph graph;
  Ref latent, image;

  explicit FullSizeGraph(const char* json) : cfg(parse_autoencoder_config(json, "full size")) {
    weights = std::make_unique<WeightStore>(
        SafeTensorsFile::build("zeros", autoencoder_parameters(cfg, DType::F16), [](size_t, uint8_t*) {}));
    const Ref in = graph.add_tensor("image", Elem::Act, {1, 512, 512, 3}, true);
    const Ref z = graph.add_tensor("latent", Elem::Act, {1, 64, 64, 4}, true);
    const auto builder = make_autoencoder_builder(cfg, *weights, graph, graph.frame, 2);
    latent = builder->encode(in, 512, 512);
    image = builder->decode(z, 64, 64);
  }
  const std::vector<int64_t>& shape(Ref r) const { return graph.tensors[r.id].shape; }
};

TEST(AutoencoderGraphs, SdVaeAt512) {
  const FullSizeGraph g(kSdVaeConfig);
  g.weights->check_all_read();
  EXPECT_EQ(g.shape(g.latent), (std::vector<int64_t>{1, 64, 64, 4}));
  EXPECT_EQ(g.shape(g.image), (std::vector<int64_t>{1, 512, 512, 3}));
  int attentions = 0, downsamples = 0;
  for (const Op& op : g.graph.frame) {
    if (const auto* a = std::get_if<AttentionOp>(&op.body)) {
      ++attentions;  // one head of dim 512 over the 64x64 latent's 4096 tokens
      EXPECT_EQ(a->p.heads, 1) << op.layer;
      EXPECT_EQ(a->p.head_dim, 512) << op.layer;
      EXPECT_EQ(a->p.q_len, 4096) << op.layer;
    }
    if (const auto* c = std::get_if<ConvOp>(&op.body); c && op.layer.ends_with("downsamplers.0.conv")) {
      ++downsamples;  // Downsample2D: stride 2, zeros after the input only, the side exactly halved
      EXPECT_EQ(c->p.pad, 0) << op.layer;
      EXPECT_EQ(c->p.h_out * 2, c->p.h) << op.layer;
    }
    if (const auto* gn = std::get_if<GroupNormOp>(&op.body)) EXPECT_FLOAT_EQ(gn->p.eps, 1e-6f) << op.layer;
  }
  EXPECT_EQ(attentions, 2);
  EXPECT_EQ(downsamples, 3);
}

TEST(AutoencoderGraphs, TaesdAt512) {
  const FullSizeGraph g(kTaesdConfig);
  g.weights->check_all_read();
  EXPECT_EQ(g.shape(g.latent), (std::vector<int64_t>{1, 64, 64, 4}));
  EXPECT_EQ(g.shape(g.image), (std::vector<int64_t>{1, 512, 512, 3}));
  int after_residual = 0;
  for (const Op& op : g.graph.frame)
    if (const auto* c = std::get_if<ConvOp>(&op.body); c && c->p.act_after_residual) {
      ++after_residual;
      EXPECT_EQ(c->p.act, Activation::Relu) << op.layer;
    }
  EXPECT_EQ(after_residual, 20);  // one per block: 1 + 3 + 3 + 3 encoding, 3 + 3 + 3 + 1 decoding
}

TEST(AutoencoderGraphs, RefuseImagesOffTheLatentGrid) {
  const FullSizeGraph g(kSdVaeConfig);
  Graph graph;
  const Ref in = graph.add_tensor("image", Elem::Act, {1, 500, 512, 3}, true);
  const auto builder = make_autoencoder_builder(g.cfg, *g.weights, graph, graph.frame, 2);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "VAE encode: image 512x500: width and height must be positive multiples of 8",
                      test::error_of([&] { builder->encode(in, 500, 512); }));
}

}  // namespace
}  // namespace rtvd
