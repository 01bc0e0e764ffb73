// The whole latent frame on the CPU (fp32) against diffusers' StableDiffusionPipeline and
// StableDiffusionImg2ImgPipeline, on the scaled-down pipeline of tests/data/tiny_sd (and the 16-channel TAESD
// of tests/data/tiny_taesd), as tools/reference/export_sd_references.py ran them: tokenizer, text encoder,
// sampler (Euler, DDIM, LCM), U-Net with and without guidance, the autoencoder's encode (img2img) and decode.
// Both sides get the same prompt, the same initial latents (txt2img) or source image and noise (img2img), and
// the noise LCM adds as diffusers drew it; the graph is build_latent_frame_plan's, as the engine runs it.
// Tolerances: the final latents and the decoded image at relative L2 <= 1e-4 (fp32 on both sides; the image
// compared as diffusers outputs it, (x + 1) / 2 clamped to [0, 1]).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "kernels/common/error.h"
#include "pipeline/latent_frame_plan.h"
#include "pipeline/models/model.h"
#include "pipeline/prompt_encoder.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;

// (1, C, H, W) NCHW -> (H, W, C) NHWC.
std::vector<float> to_nhwc(const std::vector<float>& x, int c, int h, int w) {
  std::vector<float> out(x.size());
  for (int ch = 0; ch < c; ++ch)
    for (int i = 0; i < h * w; ++i) out[size_t(i) * c + ch] = x[size_t(ch) * h * w + i];
  return out;
}

struct Reference {
  json cases;
  SafeTensorsFile tensors = SafeTensorsFile::open(test::test_data("sd_refs/pipelines.safetensors"));

  Reference() {
    std::ifstream in(test::test_data("sd_refs/pipelines.json"));
    cases = json::parse(in)["cases"];
  }
  // An NCHW fp32 tensor of the file, as NHWC.
  std::vector<float> nhwc(const std::string& name) const {
    const TensorView* t = tensors.find(name);
    if (!t) fail("pipelines.safetensors: no tensor ", name);
    std::vector<float> v(size_t(t->numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float_element(*t, int64_t(i));
    return to_nhwc(v, int(t->shape[1]), int(t->shape[2]), int(t->shape[3]));
  }
  bool has(const std::string& name) const { return tensors.find(name) != nullptr; }
};

const char* scheduler_class(const std::string& sampler) {
  return sampler == "euler" ? "EulerDiscreteScheduler" : sampler == "ddim" ? "DDIMScheduler" : "LCMScheduler";
}

class SdPipeline : public testing::TestWithParam<int> {};

TEST_P(SdPipeline, MatchesDiffusers) {
  const Reference ref;
  const json& c = ref.cases.at(GetParam());
  const std::string name = c["name"];
  SCOPED_TRACE(name);
  const bool img2img = c["mode"] == "img2img";

  ModelOptions options;
  options.path = test::test_data("tiny_sd");
  if (c["vae"] == "tiny") options.vae = test::test_data("tiny_taesd");
  Model model = load_model(options);
  json scheduler = c["scheduler"];
  scheduler["_class_name"] = scheduler_class(c["sampler"]);
  model.scheduler = parse_scheduler_config(scheduler.dump(), name + " scheduler");

  FrameSettings s;
  s.steps = c["steps"];
  s.guidance = c["guidance"];
  s.strength = c["strength"];
  s.blend = 0.0f;
  s.sampler = sampler_named(c["sampler"]);
  const SamplerPlan sampler = make_sampler_plan(*model.scheduler, *s.sampler, s.steps, img2img ? s.strength : 1.0f);

  // The sizes diffusers ran at: its latents (txt2img) or noise (img2img), times the autoencoder's factor.
  const TensorView* start = ref.tensors.find(name + (img2img ? ".noise" : ".latents"));
  ASSERT_NE(start, nullptr);
  const int f = model.autoencoder->latent().pixels_per_latent;
  const int h = int(start->shape[2]), w = int(start->shape[3]), height = h * f, width = w * f;

  auto backend = make_cpu_backend(2);
  FramePlan plan = build_latent_frame_plan({model.config, *model.autoencoder, sampler}, *model.weights, s, img2img,
                                           width, height, int(backend->act_bytes()));
  backend->upload_weights(*model.weights);
  backend->prepare(plan.graph);

  PromptEncoder prompts(std::move(*model.text_encoder), model.tokenizer_dir, model.tokenizer_pad, make_cpu_backend(2), 0);
  std::vector<float> context = prompts.embed(c["prompt"], "--prompt", nullptr);
  if (plan.batch == 2) {
    const std::vector<float>& uncond = prompts.embed(c["negative_prompt"], "--negative-prompt", nullptr);
    context.insert(context.end(), uncond.begin(), uncond.end());
  }
  backend->write(plan.context, context.data(), context.size());
  backend->run_setup();

  const std::vector<float> noise = ref.nhwc(name + (img2img ? ".noise" : ".latents"));
  backend->write(plan.sample, noise.data(), noise.size());
  if (img2img) {
    std::vector<float> image = ref.nhwc("source_image");  // [0, 1] -> [-1, 1], as diffusers' preprocessing
    for (float& v : image) v = 2.0f * v - 1.0f;
    backend->write(plan.image, image.data(), image.size());
  }
  std::vector<float> step_noise;
  for (size_t i = 0; i < plan.noise_steps.size(); ++i) {
    const std::vector<float> n = ref.nhwc(cat(name, ".lcm_noise_", i));
    step_noise.insert(step_noise.end(), n.begin(), n.end());
  }
  EXPECT_EQ(plan.noise_steps.empty(), !ref.has(name + ".lcm_noise_0")) << "LCM adds noise, the others do not";
  if (!step_noise.empty()) backend->write(plan.noise, step_noise.data(), step_noise.size());
  std::get<DenoiseBlendOp>(plan.graph.frame[plan.blend_op].body).p.first = true;  // no history: prev = the image
  backend->run_frame();

  std::vector<float> latents(noise.size()), image(size_t(width) * height * 3);
  backend->read(plan.sample, latents.data(), latents.size());
  backend->read(plan.prev, image.data(), image.size());
  const double latent_err = test::rel_l2(latents, ref.nhwc(name + ".final_latents"));
  RecordProperty("latents_rel_l2", cat(latent_err));
  EXPECT_LE(latent_err, 1e-4);
  if (!ref.has(name + ".image")) return;  // the 256^2 TAESD image is left out of the committed file
  for (float& v : image) v = std::clamp((v + 1.0f) / 2.0f, 0.0f, 1.0f);
  const double image_err = test::rel_l2(image, ref.nhwc(name + ".image"));
  RecordProperty("image_rel_l2", cat(image_err));
  std::printf("%s: latents rel_l2 %.3g, image rel_l2 %.3g\n", name.c_str(), latent_err, image_err);
  EXPECT_LE(image_err, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Cases, SdPipeline, testing::Range(0, 8), [](const testing::TestParamInfo<int>& i) {
  return Reference().cases.at(i.param)["name"].get<std::string>();
});

}  // namespace
}  // namespace rtvd
