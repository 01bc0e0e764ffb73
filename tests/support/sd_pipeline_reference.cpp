#include "support/sd_pipeline_reference.h"

#include <algorithm>
#include <fstream>

#include "base/error.h"
#include "pipeline/frame_plan.h"
#include "pipeline/model_files/tensor_set.h"
#include "pipeline/models/model.h"
#include "pipeline/prompt_encoder.h"
#include "pipeline/sdxl_prompt_encoder.h"
#include "support/test_util.h"

namespace rtvd::test {

namespace {

using nlohmann::json;

// An NCHW fp32 tensor (1, C, H, W) of the file, as NHWC.
std::vector<float> nhwc(const SafeTensorsFile& file, const std::string& name) {
  const TensorView* t = file.find(name);
  if (!t) fail(file.label(), ": no tensor ", name);
  const int c = int(t->shape[1]), hw = int(t->shape[2] * t->shape[3]);
  std::vector<float> out(size_t(t->numel()));
  for (int ch = 0; ch < c; ++ch)
    for (int i = 0; i < hw; ++i) out[size_t(i) * c + ch] = float_element(*t, int64_t(ch) * hw + i);
  return out;
}

const char* scheduler_class(const std::string& sampler) {
  return sampler == "euler" ? "EulerDiscreteScheduler" : sampler == "ddim" ? "DDIMScheduler" : "LCMScheduler";
}

// The context (batch, tokens, width) of the prompt, and the negative prompt's in the second half with guidance.
std::vector<float> sd_context(Model& model, const json& c, int batch, DeviceKind device, KernelFamily kernels,
                              int threads) {
  std::string why;
  PromptEncoder prompts(std::move(*model.text_encoder), model.tokenizer_dir, model.tokenizer_pad,
                        make_backend(device, threads, kernels, &why), 0);
  std::vector<float> context = prompts.embed(c["prompt"], "--prompt", nullptr);
  if (batch == 2) {
    const std::vector<float>& uncond = prompts.embed(c["negative_prompt"], "--negative-prompt", nullptr);
    context.insert(context.end(), uncond.begin(), uncond.end());
  }
  return context;
}

// SDXL's conditioning: the context and pooled embedding of the prompt (and the negative prompt's), the time ids
// of the frame's size in every row.
void write_sdxl_conditioning(Backend& backend, const FramePlan& plan, Model& model, const json& c, DeviceKind device,
                             KernelFamily kernels, int threads) {
  std::string why;
  SdxlPromptEncoder prompts(SdxlTextEncoders{std::move(*model.text_encoder), std::move(*model.text_encoder_2),
                                             model.tokenizer_dir, model.tokenizer_2_dir,
                                             model.force_zeros_for_empty_prompt},
                            [&] { return make_backend(device, threads, kernels, &why); });
  SdxlPromptEmbedding e = prompts.embed(c["prompt"], "--prompt", nullptr);
  if (plan.batch == 2) {
    const SdxlPromptEmbedding n = prompts.embed_negative(c["negative_prompt"], "--negative-prompt", nullptr);
    e.context.insert(e.context.end(), n.context.begin(), n.context.end());
    e.pooled.insert(e.pooled.end(), n.pooled.begin(), n.pooled.end());
  }
  std::vector<float> time_ids;
  for (int b = 0; b < plan.batch; ++b) {
    const std::vector<float> ids = sdxl_time_ids(plan.width, plan.height);
    time_ids.insert(time_ids.end(), ids.begin(), ids.end());
  }
  backend.write(plan.context, e.context.data(), e.context.size());
  backend.write(plan.text_embeds, e.pooled.data(), e.pooled.size());
  backend.write(plan.time_ids, time_ids.data(), time_ids.size());
}

}  // namespace

PipelineReference read_pipeline_reference(const std::string& dir, std::string model_dir, std::string taesd_dir) {
  std::ifstream in(dir + "/pipelines.json");
  if (!in) fail(dir, "/pipelines.json: cannot be read");
  return {json::parse(in)["cases"], SafeTensorsFile::open(dir + "/pipelines.safetensors"), std::move(model_dir),
          std::move(taesd_dir)};
}

PipelineErrors run_pipeline_case(const PipelineReference& ref, size_t i, DeviceKind device, KernelFamily kernels,
                                 int frames) {
  const json& c = ref.cases.at(i);
  const std::string name = c["name"];
  const bool img2img = c["mode"] == "img2img";

  ModelOptions options;
  options.path = ref.model_dir;
  options.config = ref.config;
  options.loras = ref.loras;
  const json nets = c.value("nets", json::array());
  for (const json& k : nets) options.controlnets.push_back(cat(ref.controlnet_dir, "/net", k.get<int>()));
  if (c.value("vae", "full") == "tiny") options.vae = VaeChoice{VaeChoice::Kind::Folder, ref.taesd_dir};
  Model model = load_model(options);
  json scheduler = c["scheduler"];
  if (!scheduler.contains("_class_name")) scheduler["_class_name"] = scheduler_class(c.value("sampler", "euler"));
  model.scheduler = parse_scheduler_config(scheduler.dump(), name + " scheduler");

  FrameSettings s;
  s.steps = c["steps"];
  s.guidance = c["guidance"];
  s.strength = c["strength"];
  s.blend = 0.0f;
  if (c.contains("sampler")) s.sampler = sampler_named(c["sampler"]);
  for (size_t k = 0; k < nets.size(); ++k)
    s.controlnets.push_back({c["controlnet_conditioning_scale"][k], c["control_guidance_start"][k],
                             c["control_guidance_end"][k]});
  s.guess_mode = c.value("guess_mode", false);
  const SamplerPlan sampler = frame_sampler(model, s, img2img);

  // The sizes diffusers ran at: its latents (txt2img) or noise (img2img), times the autoencoder's factor.
  const std::string start_name = name + (img2img ? ".noise" : ".latents");
  const TensorView* start = ref.tensors.find(start_name);
  if (!start) fail(ref.tensors.label(), ": no tensor ", start_name);
  const int f = model.autoencoder->latent().pixels_per_latent;
  const int height = int(start->shape[2]) * f, width = int(start->shape[3]) * f;

  std::string why;
  const int threads = device == DeviceKind::Cpu ? 2 : 0;  // the CUDA backend takes no CPU thread count
  auto backend = make_backend(device, threads, kernels, &why);
  FramePlan plan = build_frame_plan(model, sampler, s, img2img, width, height, int(backend->act_bytes()));
  plan.present_op().p.first = true;  // no history: prev = the image
  backend->upload_weights(*model.weights);
  backend->prepare(plan.graph);

  if (model.sdxl()) {
    write_sdxl_conditioning(*backend, plan, model, c, device, kernels, threads);
  } else {
    const std::vector<float> context = sd_context(model, c, plan.batch, device, kernels, threads);
    backend->write(plan.context, context.data(), context.size());
  }
  backend->run_setup();

  const std::vector<float> noise = nhwc(ref.tensors, start_name);
  std::vector<float> image_in, step_noise;
  if (img2img) {
    image_in = nhwc(ref.tensors, "source_image");  // [0, 1] -> [-1, 1], as diffusers' preprocessing
    for (float& v : image_in) v = 2.0f * v - 1.0f;
  }
  for (int i = 0; i < int(plan.sampler.steps.size()); ++i) {
    const std::string noise_name = cat(name, ref.step_noise, i);
    const bool adds = std::count(plan.noise_steps.begin(), plan.noise_steps.end(), i) > 0;
    if (adds != (ref.tensors.find(noise_name) != nullptr))
      fail(name, ": rtvd's plan ", adds ? "adds" : "adds no", " noise at step ", i, ", diffusers' ",
           adds ? "none" : "some");
    if (!adds) continue;
    const std::vector<float> n = nhwc(ref.tensors, noise_name);
    step_noise.insert(step_noise.end(), n.begin(), n.end());
  }
  std::vector<std::vector<float>> controls;
  for (const json& k : nets) {  // diffusers' [0, 1], as the frame takes it: [-1, 1]
    controls.push_back(nhwc(ref.tensors, cat("control", k.get<int>())));
    for (float& v : controls.back()) v = 2 * v - 1;
  }
  for (int frame = 0; frame < frames; ++frame) {
    backend->write(plan.sample, noise.data(), noise.size());
    for (size_t k = 0; k < controls.size(); ++k)
      backend->write(plan.control_images.at(k), controls[k].data(), controls[k].size());
    if (img2img) backend->write(plan.image, image_in.data(), image_in.size());
    if (!step_noise.empty()) backend->write(plan.noise, step_noise.data(), step_noise.size());
    backend->run_frame();
  }

  std::vector<float> latents(noise.size()), image(size_t(width) * height * 3);
  backend->read(plan.sample, latents.data(), latents.size());
  backend->read(plan.prev, image.data(), image.size());
  PipelineErrors e;
  const SafeTensorsFile& expected = ref.expected ? *ref.expected : ref.tensors;
  const std::string expected_name = ref.expected ? ref.expected_name : name;
  e.latents = rel_l2(latents, nhwc(expected, expected_name + ".final_latents"));
  e.has_image = expected.find(expected_name + ".image") != nullptr;
  for (float& v : image) v = std::clamp((v + 1.0f) / 2.0f, 0.0f, 1.0f);
  if (e.has_image) e.image = rel_l2(image, nhwc(expected, expected_name + ".image"));
  e.latents_out = std::move(latents);
  e.image_out = std::move(image);
  return e;
}

}  // namespace rtvd::test
