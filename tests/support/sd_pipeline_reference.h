// diffusers' StableDiffusionPipeline / StableDiffusionImg2ImgPipeline outputs (tools/reference/
// export_sd_references.py: pipelines.json names the cases and their settings, pipelines.safetensors holds each
// case's given latents or noise, LCM's injected noise, and diffusers' final latents and image, NCHW), or
// StableDiffusionXLPipeline / StableDiffusionXLImg2ImgPipeline's (tools/reference/export_tiny_sdxl_pipeline.py,
// the same files with Euler ancestral's noise per step), and the same frame run by rtvd: build_frame_plan on a
// backend, fed the same inputs, as the engine runs it (SDXL: both text encoders, the pooled embedding and the
// time ids of sdxl_time_ids).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kernels/common/kernel_family.h"
#include "pipeline/device.h"
#include "pipeline/model_files/lora.h"
#include "pipeline/model_files/safetensors.h"

namespace rtvd::test {

struct PipelineReference {
  nlohmann::json cases;    // pipelines.json's "cases"
  SafeTensorsFile tensors;
  std::string model_dir;   // the diffusers folder the cases ran (or a single file of it: config)
  std::string taesd_dir;   // the AutoencoderTiny folder of the "tiny" cases
  // The noise the sampler adds at step i of case NAME: the tensor NAME + step_noise + i, present exactly for the
  // steps where the sampler adds noise.
  std::string step_noise = ".lcm_noise_";
  // How the model is loaded: model_dir a folder or a single file, with --config and --lora as these say.
  std::string config;
  std::vector<LoraSpec> loras;
  // ControlNet cases (tools/reference/export_tiny_controlnet.py): the folder of net1/, net2/, whose case "nets" k
  // run on the tensor "control"k with the case's scales, starts, ends and guess mode.
  std::string controlnet_dir;
  // diffusers' outputs to compare with: NAME.final_latents and NAME.image of tensors (nullptr: the reference's
  // own, under the case's name).
  const SafeTensorsFile* expected = nullptr;
  std::string expected_name;
};

// dir holds pipelines.json and pipelines.safetensors.
PipelineReference read_pipeline_reference(const std::string& dir, std::string model_dir, std::string taesd_dir);

struct PipelineErrors {
  double latents = 0, image = 0;  // relative L2 against diffusers
  bool has_image = false;         // the reference holds the decoded image (else only the latents are compared)
  std::vector<float> latents_out, image_out;  // rtvd's, NHWC (the image in [0, 1])
};

// Case i on the device: the frame run `frames` times with the same inputs (on the GPU: the eager frame, the
// autotuned ones, then CUDA graph replays), the last one compared. The image as diffusers gives it: (x + 1) / 2
// clamped to [0, 1].
PipelineErrors run_pipeline_case(const PipelineReference& ref, size_t i, DeviceKind device, KernelFamily kernels,
                                 int frames);

}  // namespace rtvd::test
