// SDXL end to end on the CPU (fp32), from a diffusers folder:
// - against diffusers' StableDiffusionXLPipeline and StableDiffusionXLImg2ImgPipeline on the tiny SDXL pipeline
//   of tests/data/tiny_sdxl_pipeline (tools/reference/export_tiny_sdxl_pipeline.py): both text encoders, the
//   pooled text embedding and the time ids, Euler ancestral (its per-step noise as diffusers drew it) and Euler,
//   with and without guidance and a negative prompt, the VAE's encode (img2img) and decode: the final latents and
//   the image at relative L2 <= 1e-4 (support/sd_pipeline_reference.h); the same with a tiny TAESDXL as the
//   pipelines' vae (tests/data/tiny_taesdxl, tools/reference/export_tiny_taesdxl.py: latents / scaling_factor 1.0);
// - --vae tiny's folders: taesdxl/ for an SDXL model, taesd/ for SD, beside the model or in the cache folder, and
//   one line naming the places looked when none is there;
// - the same pipeline as one original-layout single file and with two SDXL LoRAs (PEFT, kohya), from
//   tests/data/tiny_sdxl_single_file (tools/reference/export_tiny_sdxl_single_file.py): the single file's tensors
//   are the folder's and its frames the folder's (relative L2 <= 1e-5); each LoRA's case against diffusers'
//   load_lora_weights + fuse_lora (<= 1e-4);
// - without data, through the engine on a random-weight SDXL folder written here (support/sdxl_folder.h): a
//   stream batch's frames are the frames rendered one at a time (the pooled embedding and time ids in every
//   slot), prompt travel's end is the second prompt (the pooled embedding travels with the context), the feature
//   cache's full frame is the frame without it; the time ids diffusers makes, each SDXL LoRA prefix reaching its
//   model part, and one line for each SDXL folder and LoRA rtvd refuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "base/error.h"
#include "pipeline/engine.h"
#include "pipeline/model_files/lora.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/model_files/single_file.h"
#include "pipeline/model_files/tensor_set.h"
#include "support/sd_pipeline_reference.h"
#include "support/sdxl_folder.h"
#include "support/tensor_files.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every case of ref (its script's `cases` RUNS) on the CPU against diffusers.
void expect_cases_match(test::PipelineReference ref, const std::string& dir, size_t cases) {
  ref.step_noise = ".step_noise_";
  ASSERT_EQ(ref.cases.size(), cases) << dir << "/pipelines.json: a case of the script failed (its output says why)";
  for (size_t i = 0; i < ref.cases.size(); ++i) {
    const std::string name = ref.cases[i]["name"];
    SCOPED_TRACE(name);
    const test::PipelineErrors e = test::run_pipeline_case(ref, i, DeviceKind::Cpu, KernelFamily::Auto, 1);
    std::printf("%s: latents rel_l2 %.3g, image rel_l2 %.3g\n", name.c_str(), e.latents, e.image);
    EXPECT_LE(e.latents, 1e-4);
    EXPECT_TRUE(e.has_image);
    EXPECT_LE(e.image, 1e-4);
  }
}

TEST(SdxlPipeline, MatchesDiffusers) {
  const std::string dir = test::tiny_sdxl_pipeline_dir();
  if (dir.empty()) return;
  expect_cases_match(test::read_pipeline_reference(dir, dir + "/model", ""), dir, 7);  // export_tiny_sdxl_pipeline's RUNS
}

TEST(SdxlPipeline, TinyAutoencoderMatchesDiffusers) {
  const std::string model = test::tiny_sdxl_pipeline_dir(), dir = test::tiny_taesdxl_dir();
  if (model.empty() || dir.empty()) return;
  test::PipelineReference ref = test::read_pipeline_reference(dir, model + "/model", dir + "/taesdxl");
  for (const auto& c : ref.cases) ASSERT_EQ(c.value("vae", ""), "tiny") << dir << "/pipelines.json";
  expect_cases_match(std::move(ref), dir, 2);  // export_tiny_taesdxl's RUNS
}

// $RTVD_CACHE_DIR set to a folder of the test's for its lifetime, then restored.
class CacheDirOverride {
 public:
  explicit CacheDirOverride(const std::string& dir) {
    if (const char* old = std::getenv("RTVD_CACHE_DIR")) saved_ = old;
    setenv("RTVD_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDirOverride() {
    if (saved_) setenv("RTVD_CACHE_DIR", saved_->c_str(), 1);
    else unsetenv("RTVD_CACHE_DIR");
  }

 private:
  std::optional<std::string> saved_;
};

// --vae tiny: an SDXL model takes TAESDXL from a taesdxl/ folder (beside the model first, then the cache folder)
// and never an SD TAESD's taesd/ folder beside it, whose latents are SD's; an SD model takes taesd/ and never
// taesdxl/. None there: one line naming every place looked and the download.
TEST(TinyAutoencoderFolder, TaesdxlForSdxlTaesdForSd) {
  test::TempDir tmp{"rtvd_taesdxl_lookup"};
  const std::string sdxl = tmp.path("models/sdxl"), cache = tmp.path("cache");
  test::write_random_sdxl_folder(sdxl);
  fs::create_directories(cache);
  const CacheDirOverride cache_dir(cache);
  const auto put_taesd = [](const std::string& dir) {  // an AutoencoderTiny folder
    fs::create_directories(dir);
    fs::copy(test::test_data("tiny_taesd"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  };
  const auto load_tiny = [](const std::string& path) {
    ModelOptions o;
    o.path = path;
    o.vae = VaeChoice{VaeChoice::Kind::Tiny, ""};
    return load_model(o);
  };
  const auto vae_source = [](const Model& m) { return m.components.at(1).source; };

  put_taesd(tmp.path("models/taesd"));
  put_taesd(cache + "/taesd");
  EXPECT_EQ(test::error_of([&] { load_tiny(sdxl); }),
            cat("--vae tiny: no TAESDXL folder at ", tmp.path("models/taesdxl"), ", ", cache,
                "/taesdxl (download madebyollin/taesdxl there, or give its folder: --vae DIR)"));

  put_taesd(cache + "/taesdxl");
  const Model from_cache = load_tiny(sdxl);
  EXPECT_EQ(vae_source(from_cache), cache + "/taesdxl");
  EXPECT_EQ(from_cache.components.at(1).name, "vae (TAESDXL)");
  EXPECT_TRUE(from_cache.autoencoder->tiny());
  put_taesd(tmp.path("models/taesdxl"));
  EXPECT_EQ(vae_source(load_tiny(sdxl)), tmp.path("models/taesdxl")) << "beside the model first";

  // SD (tests/data/tiny_sd, beside which there is no taesd/): the cache's taesd/, never a taesdxl/.
  const std::string sd = test::test_data("tiny_sd");
  const std::string beside_sd = (fs::absolute(sd).lexically_normal().parent_path() / "taesd").string();
  ASSERT_FALSE(fs::exists(beside_sd));
  EXPECT_EQ(vae_source(load_tiny(sd)), cache + "/taesd");
  fs::remove_all(cache + "/taesd");
  EXPECT_EQ(test::error_of([&] { load_tiny(sd); }),
            cat("--vae tiny: no TAESD folder at ", beside_sd, ", ", cache,
                "/taesd (download madebyollin/taesd there, or give its folder: --vae DIR)"));
  EXPECT_EQ(taesd_folders(sdxl, true), (std::vector<std::string>{tmp.path("models/taesdxl"), cache + "/taesdxl"}));
  EXPECT_EQ(taesd_folders(sd, false), (std::vector<std::string>{beside_sd, cache + "/taesd"}));
}

// The index of the case named `name` in the reference (an Error when it has none).
size_t case_index(const test::PipelineReference& ref, const std::string& name) {
  for (size_t i = 0; i < ref.cases.size(); ++i)
    if (ref.cases[i]["name"] == name) return i;
  fail("pipelines.json: no case ", name);
}

// The tiny SDXL pipeline as one original-layout file (tools/reference/export_tiny_sdxl_single_file.py, which
// checks it against diffusers' from_single_file), read with the folder's configs as diffusers reads it
// (config=): every tensor is the folder's, bit for bit (text_projection transposed), and each case's frame is
// the folder's frame and diffusers' image.
TEST(SdxlSingleFile, SameTensorsAndFramesAsTheFolder) {
  const std::string dir = test::tiny_sdxl_pipeline_dir(), files = test::tiny_sdxl_single_file_dir();
  if (dir.empty() || files.empty()) return;
  const std::string folder = dir + "/model";
  const std::vector<std::string> weights = {"unet/diffusion_pytorch_model.safetensors",
                                            "vae/diffusion_pytorch_model.safetensors", "text_encoder/model.safetensors",
                                            "text_encoder_2/model.safetensors"};
  std::vector<std::string> sources = {files + "/tiny_sdxl_extras.safetensors"};
  for (const std::string& w : weights) sources.push_back(folder + "/" + w);
  std::map<std::string, std::string> metadata;
  const std::vector<TensorToWrite> packed = test::packed_file_tensors(files + "/tiny_sdxl.manifest.json", sources, metadata);
  test::TempDir tmp{"rtvd_sdxl_single_file"};
  const std::string path = tmp.path("tiny_sdxl.safetensors");
  write_safetensors(path, packed, metadata);

  const SingleFileCheckpoint c = open_single_file(path, folder);
  EXPECT_EQ(c.text_encoder_layout, "sdxl");
  const std::vector<const SingleFileComponent*> components = {&c.unet, &c.vae, &c.text_encoder, &c.text_encoder_2};
  for (size_t k = 0; k < components.size(); ++k) {
    const SingleFileComponent* set = components[k];
    SCOPED_TRACE(weights[k]);
    const SafeTensorsFile want = SafeTensorsFile::open(folder + "/" + weights[k]);
    size_t n = 0;
    for (const TensorView& w : want.tensors()) {
      const std::string name = w.name.starts_with("text_model.") ? w.name.substr(11) : w.name;
      if (name.ends_with("position_ids")) continue;
      const TensorView* got = set->tensors.find(name);
      ASSERT_NE(got, nullptr) << name;
      ++n;
      EXPECT_EQ(got->shape, w.shape) << name << " from " << set->tensors.source_name(name);
      ASSERT_EQ(got->bytes, w.bytes) << name;
      EXPECT_EQ(got->dtype, w.dtype) << name;
      EXPECT_EQ(std::memcmp(got->data, w.data, w.bytes), 0) << name << " differs from " << set->tensors.source_name(name);
    }
    EXPECT_EQ(n, set->tensors.tensors().size()) << "the file's component has tensors the folder has not";
  }

  test::PipelineReference by_folder = test::read_pipeline_reference(dir, folder, "");
  by_folder.step_noise = ".step_noise_";
  test::PipelineReference by_file = test::read_pipeline_reference(dir, path, "");
  by_file.step_noise = ".step_noise_";
  by_file.config = folder;
  for (const char* name : {"txt2img_euler_a_g5", "img2img_euler_g4_s05"}) {
    SCOPED_TRACE(name);
    const size_t i = case_index(by_folder, name);
    const test::PipelineErrors a = test::run_pipeline_case(by_folder, i, DeviceKind::Cpu, KernelFamily::Auto, 1);
    const test::PipelineErrors b = test::run_pipeline_case(by_file, i, DeviceKind::Cpu, KernelFamily::Auto, 1);
    std::printf("%s: single file against the folder: latents rel_l2 %.3g, image %.3g; against diffusers %.3g\n", name,
                test::rel_l2(b.latents_out, a.latents_out), test::rel_l2(b.image_out, a.image_out), b.image);
    EXPECT_LE(test::rel_l2(b.latents_out, a.latents_out), 1e-5);
    EXPECT_LE(test::rel_l2(b.image_out, a.image_out), 1e-5);
    EXPECT_LE(b.image, 1e-4);
  }
}

// The tiny SDXL LoRAs (PEFT, kohya with the original layout's U-Net names) on the tiny pipeline, against
// diffusers' load_lora_weights + fuse_lora at the same scale: the case's final latents and image.
TEST(SdxlLora, MatchesDiffusers) {
  const std::string dir = test::tiny_sdxl_pipeline_dir(), files = test::tiny_sdxl_single_file_dir();
  if (dir.empty() || files.empty()) return;
  std::ifstream in(files + "/lora_cases.json");
  const json cases = json::parse(in)["cases"];
  ASSERT_EQ(cases.size(), 2u) << files << "/lora_cases.json: a LoRA of the script failed (its output says why)";
  const SafeTensorsFile expected = SafeTensorsFile::open(files + "/lora_cases.safetensors");
  for (const json& c : cases) {
    const std::string lora = c["lora"];
    SCOPED_TRACE(lora);
    test::PipelineReference ref = test::read_pipeline_reference(dir, dir + "/model", "");
    ref.step_noise = ".step_noise_";
    ref.loras = {{files + "/" + lora, c["scale"].get<float>()}};
    ref.expected = &expected;
    ref.expected_name = lora.substr(5, lora.find('.') - 5);  // lora_peft.safetensors: peft
    const test::PipelineErrors e = test::run_pipeline_case(ref, case_index(ref, c["case"]), DeviceKind::Cpu,
                                                           KernelFamily::Auto, 1);
    std::printf("%s: latents rel_l2 %.3g, image rel_l2 %.3g\n", lora.c_str(), e.latents, e.image);
    EXPECT_LE(e.latents, 1e-4);
    EXPECT_TRUE(e.has_image);
    EXPECT_LE(e.image, 1e-4);
  }
}

// A random-weight SDXL folder, written once for the engine tests.
const std::string& random_sdxl_dir() {
  static test::TempDir tmp{"rtvd_random_sdxl"};
  static const std::string dir = [] {
    test::write_random_sdxl_folder(tmp.path("sdxl"));
    return tmp.path("sdxl");
  }();
  return dir;
}

EngineOptions sdxl_engine() {
  EngineOptions o;
  o.model.path = random_sdxl_dir();
  o.device = DeviceKind::Cpu;
  o.threads = 2;
  o.width = 64;
  o.height = 48;
  return o;
}

int max_byte_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int d = a.size() == b.size() ? 0 : 256;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(int(a[i]) - int(b[i])));
  return d;
}

// Settings with a fresh seed.
FrameSettings settings(test::Rng& rng, int steps, float guidance, float blend) {
  FrameSettings s;
  s.seed = rng.gen();
  s.steps = steps;
  s.guidance = guidance;
  s.strength = 0.7f;
  s.blend = blend;
  return s;
}

TEST(SdxlEngine, StreamBatchFramesAreTheOneAtATimeFrames) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  FrameSettings s = settings(rng, 2, 3.0f, 0.3f);
  const PromptSettings prompts{.prompt = "a red fox in the snow", .negative_prompt = "blurry"};
  const std::vector<float> source = rng.vector(size_t(64) * 48 * 3);
  constexpr int kFrames = 4, kStream = 4;
  Engine one(sdxl_engine());
  one.set_prompts(prompts);
  one.configure(s, true);
  std::vector<std::vector<uint8_t>> expected;
  for (int f = 0; f < kFrames; ++f) expected.push_back(one.render(&source).pixels);
  ASSERT_NE(expected[0], expected[1]) << "the noise walk moves: the frames must differ";

  Engine stream(sdxl_engine());
  stream.set_prompts(prompts);
  s.stream_batch = kStream;
  stream.configure(s, true);
  for (int n = 0; n < kFrames + kStream - 1; ++n) {
    stream.step(&source);
    const int f = n - (kStream - 1);
    if (f >= 0) EXPECT_LE(max_byte_diff(stream.image().pixels, expected[f]), 1) << "frame " << f;
  }
}

TEST(SdxlEngine, PromptTravelEndsAtTheSecondPrompt) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const FrameSettings s = settings(rng, 1, 0.0f, 0.0f);
  Engine travel(sdxl_engine()), second(sdxl_engine()), first(sdxl_engine());
  travel.set_prompts({.prompt = "a watercolor fox", .prompt_to = "a city at night", .travel_frames = 1});
  second.set_prompts({.prompt = "a city at night"});
  first.set_prompts({.prompt = "a watercolor fox"});
  std::vector<uint8_t> travelled, ends, starts;
  for (Engine* e : {&travel, &second, &first}) e->configure(s, false);
  for (int f = 0; f < 2; ++f) {  // frame 1: travel_frames on, the second prompt
    travelled = travel.render(nullptr).pixels;
    ends = second.render(nullptr).pixels;
    starts = first.render(nullptr).pixels;
  }
  EXPECT_EQ(max_byte_diff(travelled, ends), 0);
  EXPECT_GT(max_byte_diff(starts, ends), 8) << "the two prompts must give different frames";
}

TEST(SdxlEngine, FeatureCacheFullFrameIsTheFrameWithoutTheCache) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  FrameSettings s = settings(rng, 2, 2.0f, 0.0f);
  Engine plain(sdxl_engine()), cached(sdxl_engine());
  for (Engine* e : {&plain, &cached}) e->set_prompts({.prompt = "a watercolor fox", .negative_prompt = "blurry"});
  plain.configure(s, false);
  s.cache_refresh = 3;
  cached.configure(s, false);
  const std::vector<uint8_t> full = plain.render(nullptr).pixels;
  EXPECT_EQ(max_byte_diff(cached.render(nullptr).pixels, full), 0) << "the first frame is a full one";
  EXPECT_EQ(cached.full_frames(), 1);
  const std::vector<uint8_t> next = plain.render(nullptr).pixels;
  const std::vector<uint8_t> from_cache = cached.render(nullptr).pixels;
  EXPECT_EQ(cached.full_frames(), 1) << "the second frame runs from the cache";
  EXPECT_GT(max_byte_diff(from_cache, next), 0) << "the cached frame reuses the first frame's deep features";
}

// An SD 1.x LoRA (tests/data/lora, of tiny_sd's U-Net and text encoder) names modules SDXL's U-Net does not
// have: one line naming the file, the key and the module.
TEST(SdxlLoraErrors, AnSdLoraNamesAModuleSdxlHasNot) {
  ModelOptions o;
  o.path = random_sdxl_dir();
  for (const char* format : {"peft", "kohya"}) {
    o.loras = {{test::test_data(cat("lora/lora_", format, ".safetensors")), 1.0f}};
    const std::string e = test::error_of([&] { load_model(o); });
    SCOPED_TRACE(e);
    EXPECT_TRUE(e.starts_with(o.loras[0].path + ": key '"));
    EXPECT_NE(e.find("': the U-Net has no module '"), std::string::npos);
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
}

// Each SDXL LoRA format's keys reach the module they name: text_encoder_2 / lora_te2_ the second encoder's,
// text_encoder / lora_te1_ the first's, at alpha / rank times the scale; the second's keys on a model with
// one text encoder are refused by name.
TEST(SdxlLora, EachPrefixReachesItsPart) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const auto factor = [&](const std::string& name, std::vector<int64_t> shape) {
    const size_t n = size_t(shape[0] * shape[1]);
    return test::float_tensor(name, DType::F32, std::move(shape), rng.normal_vector(n));
  };
  TensorSet unet(SafeTensorsFile::open(fs::path(random_sdxl_dir()) / "unet/diffusion_pytorch_model.safetensors"));
  TensorSet te1(SafeTensorsFile::open(fs::path(random_sdxl_dir()) / "text_encoder/model.safetensors"));
  TensorSet te2(SafeTensorsFile::open(fs::path(random_sdxl_dir()) / "text_encoder_2/model.safetensors"));
  test::TempDir tmp{"rtvd_sdxl_lora"};
  const std::string q = "encoder.layers.0.self_attn.q_proj";
  // The weight as the folder names it (transformers before 5 with "text_model.").
  const auto weight = [&](const TensorSet& t) {
    return t.find(cat("text_model.", q, ".weight")) ? cat("text_model.", q, ".weight") : cat(q, ".weight");
  };
  const int64_t w1 = te1.get_rank(weight(te1), 2).shape[0], w2 = te2.get_rank(weight(te2), 2).shape[0];
  struct Case {
    const char* file;
    std::vector<TensorToWrite> tensors;
    float scale;  // alpha / rank
  };
  std::vector<Case> cases;
  cases.push_back({"peft.safetensors",
                   {factor(cat("text_encoder.", q, ".lora_A.weight"), {2, w1}), factor(cat("text_encoder.", q, ".lora_B.weight"), {w1, 2}),
                    factor(cat("text_encoder_2.", q, ".lora_A.weight"), {2, w2}), factor(cat("text_encoder_2.", q, ".lora_B.weight"), {w2, 2})},
                   1.0f});
  cases.push_back({"kohya.safetensors",
                   {factor("lora_te1_text_model_encoder_layers_0_self_attn_q_proj.lora_down.weight", {2, w1}),
                    factor("lora_te1_text_model_encoder_layers_0_self_attn_q_proj.lora_up.weight", {w1, 2}),
                    test::float_tensor("lora_te1_text_model_encoder_layers_0_self_attn_q_proj.alpha", DType::F32, {}, {3.0f}),
                    factor("lora_te2_text_model_encoder_layers_0_self_attn_q_proj.lora_down.weight", {2, w2}),
                    factor("lora_te2_text_model_encoder_layers_0_self_attn_q_proj.lora_up.weight", {w2, 2}),
                    test::float_tensor("lora_te2_text_model_encoder_layers_0_self_attn_q_proj.alpha", DType::F32, {}, {3.0f})},
                   1.5f});
  // The U-Net as kohya names SDXL's: the original layout's modules, the added embedding's label_emb among them.
  const std::map<std::string, std::string> unet_modules = {
      {"input_blocks_4_1_transformer_blocks_0_attn1_to_q", "down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q.weight"},
      {"output_blocks_2_1_proj_out", "up_blocks.0.attentions.2.proj_out.weight"},
      {"label_emb_0_0", "add_embedding.linear_1.weight"}};
  for (const auto& [module, diffusers] : unet_modules) {
    const TensorView& w = unet.get_rank(diffusers, 2);
    for (const auto& [role, shape] : {std::pair{"lora_down", std::vector<int64_t>{2, w.shape[1]}},
                                      std::pair{"lora_up", std::vector<int64_t>{w.shape[0], 2}}})
      cases[1].tensors.insert(cases[1].tensors.begin(), factor(cat("lora_unet_", module, ".", role, ".weight"), shape));
  }
  for (Case& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = tmp.path(c.file);
    write_safetensors(path, c.tensors);
    TensorSet u = unet, a = te1, b = te2;
    apply_lora({path, 0.5f}, u, &a, &b);
    for (const TensorSet* set : {&a, &b}) {
      const std::vector<LowRankDelta>* d = set->deltas(weight(*set));
      ASSERT_TRUE(d && d->size() == 1);
      EXPECT_EQ(d->front().scale, 0.5f * c.scale);
      EXPECT_EQ(d->front().down.shape[1], set == &a ? w1 : w2);
    }
    if (c.tensors.size() > 6)
      for (const auto& [module, diffusers] : unet_modules) {
        const std::vector<LowRankDelta>* d = u.deltas(diffusers);
        EXPECT_TRUE(d && d->size() == 1 && d->front().scale == 0.5f) << module << " -> " << diffusers;
      }
    // The file's first key of the second encoder, in file order.
    const auto second = std::ranges::find_if(c.tensors, [](const TensorToWrite& t) {
      return t.name.starts_with("text_encoder_2.") || t.name.starts_with("lora_te2_");
    });
    const std::string first = second->name;
    EXPECT_EQ(test::error_of([&] { apply_lora({path, 1.0f}, u, &a); }),
              cat(path, ": key '", first, "': an update of the second text encoder (text_encoder_2), but the model has none"));
  }
}

TEST(SdxlTimeIds, OriginalSizeCropAndTargetSizeHeightFirst) {
  const std::vector<float> expected = {48, 64, 0, 0, 48, 64};
  EXPECT_EQ(sdxl_time_ids(64, 48), expected);
}

// An SDXL folder whose files go as far as the checks of its U-Net against its text encoders: the U-Net config
// of tests/data/tiny_sdxl (context 64, projection_class_embeddings_input_dim 80 = 32 + 6 x 8), encoders of
// widths 32 and 32 with a pooled projection of 32 (their configs; their weights are never read).
struct SdxlConfigFolder {
  test::TempDir tmp{"rtvd_sdxl_pipeline"};
  std::string dir = tmp.path("sdxl");
  json index = {{"_class_name", "StableDiffusionXLPipeline"}, {"force_zeros_for_empty_prompt", true},
                {"scheduler", {"diffusers", "EulerAncestralDiscreteScheduler"}},
                {"text_encoder", {"transformers", "CLIPTextModel"}},
                {"text_encoder_2", {"transformers", "CLIPTextModelWithProjection"}},
                {"tokenizer", {"transformers", "CLIPTokenizer"}}, {"tokenizer_2", {"transformers", "CLIPTokenizer"}},
                {"unet", {"diffusers", "UNet2DConditionModel"}}};
  SdxlConfigFolder() {
    for (const char* part : {"unet", "text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2", "scheduler"})
      fs::create_directories(dir + "/" + part);
    fs::copy_file(test::test_data("tiny_sdxl/unet/config.json"), dir + "/unet/config.json");
    write(dir + "/scheduler/scheduler_config.json", {{"_class_name", "EulerAncestralDiscreteScheduler"}});
    write_safetensors(dir + "/unet/diffusion_pytorch_model.safetensors",
                      {{"conv_in.weight", DType::F16, {16, 4, 3, 3}, std::vector<uint8_t>(16 * 4 * 9 * 2)}});
    write_text_encoder("text_encoder", 32, 0);
    write_text_encoder("text_encoder_2", 32, 32);
    write(dir + "/model_index.json", index);
  }
  void write_text_encoder(const std::string& name, int width, int projection) const {
    write(cat(dir, "/", name, "/config.json"),
          {{"architectures", {projection ? "CLIPTextModelWithProjection" : "CLIPTextModel"}},
           {"model_type", "clip_text_model"}, {"vocab_size", 49408}, {"hidden_size", width},
           {"intermediate_size", 2 * width}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
           {"max_position_embeddings", 77}, {"hidden_act", projection ? "gelu" : "quick_gelu"},
           {"layer_norm_eps", 1e-5}, {"projection_dim", projection ? projection : 8}});
  }
  static void write(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }
  std::string error() const {
    ModelOptions o;
    o.path = dir;
    return test::error_of([&] { load_model(o); });
  }
};

TEST(SdxlFolderErrors, PooledWidthThatDisagreesWithTheUNetIsOneLineNamingBoth) {
  SdxlConfigFolder f;
  f.write_text_encoder("text_encoder_2", 32, 24);
  EXPECT_EQ(f.error(), cat(f.dir, "/unet/config.json: projection_class_embeddings_input_dim is 80, but the time ids "
                           "(6 x addition_time_embed_dim = 48) and text_encoder_2's pooled projection (projection_dim "
                           "24) make 72"));
}

TEST(SdxlFolderErrors, EncoderWidthsThatDoNotSumToTheContextAreOneLine) {
  SdxlConfigFolder f;
  f.write_text_encoder("text_encoder", 40, 0);
  EXPECT_EQ(f.error(), cat(f.dir, "/unet/config.json: cross_attention_dim is 64, but the two text encoders' widths "
                           "sum to 72 (text_encoder 40 + text_encoder_2 32)"));
}

TEST(SdxlFolderErrors, PipelineAndUNetOfDifferentFamiliesAreOneLine) {
  SdxlConfigFolder f;
  f.index["_class_name"] = "StableDiffusionPipeline";
  f.index.erase("text_encoder_2");
  f.index.erase("tokenizer_2");
  f.write(f.dir + "/model_index.json", f.index);
  EXPECT_EQ(f.error(), cat(f.dir, "/unet/config.json: an SDXL U-Net (addition_embed_type \"text_time\"), but "
                           "model_index.json names a Stable Diffusion pipeline (one text encoder): expected _class_name "
                           "StableDiffusionXLPipeline"));

  SdxlConfigFolder g;
  fs::copy_file(test::test_data("tiny_sd/unet/config.json"), g.dir + "/unet/config.json",
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(g.error(), cat(g.dir, "/unet/config.json: model_index.json names an SDXL pipeline, but this U-Net has no "
                           "addition_embed_type \"text_time\" (the pooled text embedding and time ids SDXL's pipeline "
                           "gives it)"));
}

}  // namespace
}  // namespace rtvd
