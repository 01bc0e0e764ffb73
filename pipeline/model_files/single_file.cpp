#include "pipeline/model_files/single_file.h"

#include <array>
#include <charconv>
#include <filesystem>
#include <optional>
#include <utility>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/checkpoint_file.h"
#include "pipeline/model_files/clip_text_config.h"
#include "pipeline/model_files/controlnet_single_file.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/ldm_layout.h"

namespace rtvd {

namespace {

constexpr std::string_view kUNet = "model.diffusion_model.", kVae = "first_stage_model.",
                           kClip = "cond_stage_model.transformer.", kOpenClip = "cond_stage_model.model.";
// SDXL's (SGM's GeneralConditioner): CLIP ViT-L as transformers names it, then OpenCLIP bigG. The refiner's one
// embedder is OpenCLIP bigG at index 0.
constexpr std::string_view kSdxlClip = "conditioner.embedders.0.transformer.",
                           kSdxlOpenClip = "conditioner.embedders.1.model.",
                           kRefinerOpenClip = "conditioner.embedders.0.model.";

// What LatentDiffusion saved beside the model: its DDPM noise schedule (register_schedule's buffers; rtvd's
// samplers compute their own from the scheduler config) and the EMA copy of the U-Net (model_ema.*; the
// weights under model.diffusion_model are the ones diffusers loads too).
constexpr std::array<std::string_view, 13> kScheduleBuffers = {
    "betas", "alphas_cumprod", "alphas_cumprod_prev", "sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod",
    "log_one_minus_alphas_cumprod", "sqrt_recip_alphas_cumprod", "sqrt_recipm1_alphas_cumprod",
    "posterior_variance", "posterior_log_variance_clipped", "posterior_mean_coef1", "posterior_mean_coef2", "logvar"};
// ComfyUI marks a v-prediction checkpoint with an empty tensor of this name.
constexpr std::string_view kVPredMarker = "v_pred";

struct Prediction {
  std::string type, source;
};

// epsilon or v_prediction from a prediction-type key's value; another value is an error.
std::string prediction_value(const std::string& label, const std::string& key, const std::string& value) {
  if (value == "epsilon" || value == "eps") return "epsilon";
  if (value == "v" || value == "v_prediction" || value == "v-prediction") return "v_prediction";
  fail(label, ": metadata ", quote(key), " is ", quote(value), ", expected epsilon or v");
}

// The prediction type from the keys published files carry: the SAI ModelSpec's modelspec.prediction_type
// ("epsilon" or "v"; ComfyUI writes modelspec.predict_key), its architecture ids that imply one
// (stable-diffusion-v1, -v2-512: epsilon; -v2-768-v: v), kohya's ss_v_parameterization, ComfyUI's marker
// tensor. Keys that disagree are an error.
Prediction prediction_type(const SafeTensorsFile& file) {
  std::vector<Prediction> said;
  const auto& meta = file.metadata();
  for (const char* key : {"modelspec.prediction_type", "modelspec.predict_key"})
    if (const auto it = meta.find(key); it != meta.end()) said.push_back({prediction_value(file.label(), key, it->second), key});
  if (const auto it = meta.find("modelspec.architecture"); it != meta.end()) {
    if (it->second == "stable-diffusion-v2-768-v") said.push_back({"v_prediction", it->first});
    if (it->second == "stable-diffusion-v1" || it->second == "stable-diffusion-v2-512" ||
        it->second == "stable-diffusion-xl-v1-base")
      said.push_back({"epsilon", it->first});
  }
  if (const auto it = meta.find("ss_v_parameterization"); it != meta.end()) {
    if (it->second != "True" && it->second != "False" && it->second != "true" && it->second != "false")
      fail(file.label(), ": metadata 'ss_v_parameterization' is ", quote(it->second), ", expected True or False");
    said.push_back({it->second == "True" || it->second == "true" ? "v_prediction" : "epsilon", it->first});
  }
  if (file.find(kVPredMarker)) said.push_back({"v_prediction", cat("tensor ", quote(kVPredMarker))});
  for (const Prediction& p : said)
    if (p.type != said[0].type)
      fail(file.label(), ": ", said[0].source, " says ", said[0].type, " but ", p.source, " says ", p.type);
  return said.empty() ? Prediction{} : said[0];
}

// modelspec.resolution ("768x768"): the image side the model was trained at, when square.
std::optional<int> metadata_resolution(const SafeTensorsFile& file) {
  const auto it = file.metadata().find("modelspec.resolution");
  if (it == file.metadata().end()) return std::nullopt;
  const std::string& v = it->second;
  int w = 0, h = 0;
  const size_t x = v.find('x');
  const auto parse = [&](size_t begin, size_t end, int& out) {
    const auto r = std::from_chars(v.data() + begin, v.data() + end, out);
    return r.ec == std::errc() && r.ptr == v.data() + end && out > 0 && out % 8 == 0;
  };
  if (x == std::string::npos || !parse(0, x, w) || !parse(x + 1, v.size(), h))
    fail(file.label(), ": metadata 'modelspec.resolution' is ", quote(v), ", expected WIDTHxHEIGHT in multiples of 8");
  if (w != h) return std::nullopt;
  return w;
}

bool is_schedule_buffer(std::string_view name) {
  for (std::string_view b : kScheduleBuffers)
    if (name == b) return true;
  return false;
}

SingleFileCheckpoint map_single_file(std::shared_ptr<const SafeTensorsFile> file, const std::string& config_folder) {
  const std::string& path = file->label();
  LdmComponent unet{std::string(kUNet), {}, file}, vae{std::string(kVae), {}, file},
      clip{std::string(kClip), {}, file}, open_clip{std::string(kOpenClip), {}, file},
      sdxl_clip{std::string(kSdxlClip), {}, file}, sdxl_open_clip{std::string(kSdxlOpenClip), {}, file};
  for (const TensorView& t : file->tensors()) {
    const std::string_view n = t.name;
    if (n.starts_with(kUNet)) unet.tensors.push_back(&t);
    else if (n.starts_with(kVae)) vae.tensors.push_back(&t);
    else if (n.starts_with(kClip)) clip.tensors.push_back(&t);
    else if (n.starts_with(kOpenClip)) open_clip.tensors.push_back(&t);
    else if (n.starts_with(kSdxlClip)) sdxl_clip.tensors.push_back(&t);
    else if (n.starts_with(kSdxlOpenClip)) sdxl_open_clip.tensors.push_back(&t);
    else if (n.starts_with(kRefinerOpenClip))
      fail(path, ": tensor ", quote(n), ": an SDXL refiner checkpoint (its one text encoder, OpenCLIP bigG, as "
           "conditioner.embedders.0, and the aesthetic score in its U-Net's added embedding), which rtvd does not run");
    else if (!is_schedule_buffer(n) && !n.starts_with("model_ema.") && n != kVPredMarker) {
      if (const TensorView* control = controlnet_tensor(*file))
        fail(path, ": tensor ", quote(control->name), ": a ControlNet (its hint block or zero convs), not a Stable "
             "Diffusion checkpoint");
      fail(path, ": tensor ", quote(n), ": not part of a Stable Diffusion checkpoint's U-Net (", kUNet, "), VAE (", kVae,
           ") or text encoders (", kClip, ", ", kOpenClip, "; SDXL's ", kSdxlClip, ", ", kSdxlOpenClip, ")");
    }
  }
  for (const auto& [c, what] : {std::pair{&unet, "U-Net"}, std::pair{&vae, "VAE"}})
    if (c->tensors.empty()) fail(path, ": no ", what, " (no tensor ", c->prefix, "*): not a whole Stable Diffusion checkpoint");
  const bool sdxl = !sdxl_clip.tensors.empty() || !sdxl_open_clip.tensors.empty();
  if (sdxl && (!clip.tensors.empty() || !open_clip.tensors.empty()))
    fail(path, ": text encoders of SD (", clip.tensors.empty() ? kOpenClip : kClip, "*) and of SDXL (",
         sdxl_clip.tensors.empty() ? kSdxlOpenClip : kSdxlClip, "*) in one file");
  if (sdxl && (sdxl_clip.tensors.empty() || sdxl_open_clip.tensors.empty()))
    fail(path, ": SDXL's ", sdxl_clip.tensors.empty() ? "first" : "second", " text encoder is missing (no tensor ",
         sdxl_clip.tensors.empty() ? kSdxlClip : kSdxlOpenClip, "*): an SDXL checkpoint has both");
  if (!sdxl && clip.tensors.empty() == open_clip.tensors.empty())
    fail(path, clip.tensors.empty() ? ": no text encoder (no tensor " : ": two text encoders (tensors ", kClip, "* ",
         clip.tensors.empty() ? "or " : "and ", kOpenClip, "*)");
  const bool is_open_clip = !sdxl && clip.tensors.empty();

  const Prediction prediction = prediction_type(*file);
  const std::string folder = config_folder.empty() ? "" : config_folder + "/";
  const auto config = [&](const char* component) { return cat(folder, component, "/config.json"); };
  const auto config_layers = [&](const char* component) {
    return folder.empty() ? -1 : load_clip_text_config(config(component)).num_hidden_layers;
  };
  SingleFileCheckpoint out{
      {"", config("unet"), map_ldm_unet(unet)},
      {"", config("vae"), map_ldm_vae(vae)},
      {"", config("text_encoder"),
       sdxl ? map_ldm_clip(sdxl_clip) : is_open_clip ? map_open_clip(open_clip, config_layers("text_encoder")) : map_ldm_clip(clip)},
      {"", config("text_encoder_2"),
       sdxl ? map_open_clip_with_projection(sdxl_open_clip, config_layers("text_encoder_2")) : TensorSet(path)},
      sdxl ? "sdxl" : is_open_clip ? "openclip" : "openai-clip",
      prediction.type,
      prediction.source,
      "",
  };
  // The U-Net attends to the text encoders' hidden states (SDXL's two side by side) and only SDXL's takes the
  // added embedding: these must agree, whatever the configs say.
  const TensorView* to_k = out.unet.tensors.find("mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight");
  const TensorView* token = out.text_encoder.tensors.find("embeddings.token_embedding.weight");
  const TensorView* token_2 = out.text_encoder_2.tensors.find("embeddings.token_embedding.weight");
  if (to_k && token && to_k->shape.size() == 2 && token->shape.size() == 2 &&
      (!token_2 || token_2->shape.size() == 2) &&
      to_k->shape[1] != token->shape[1] + (token_2 ? token_2->shape[1] : 0))
    fail(path, ": the U-Net attends to a context of width ", to_k->shape[1], " (", out.unet.tensors.describe(to_k->name),
         ") but the text encoder", sdxl ? "s' are " : "'s is ", token->shape[1],
         sdxl ? cat(" + ", token_2 ? token_2->shape[1] : 0) : "", " (", out.text_encoder.tensors.describe(token->name), ")");
  const bool added_embedding = out.unet.tensors.find("add_embedding.linear_1.weight") != nullptr;
  if (added_embedding != sdxl)
    fail(path, sdxl ? ": SDXL's text encoders but no added embedding in the U-Net (no tensor " : ": an added embedding (",
         kUNet, "label_emb.0.0.weight", sdxl ? ")" : ") in the U-Net, which only SDXL's takes, but SD's text encoder (",
         sdxl ? "" : cat(is_open_clip ? kOpenClip : kClip, "*) rather than SDXL's two (", kSdxlClip, "*, ", kSdxlOpenClip, "*)"));

  std::vector<SingleFileComponent*> components = {&out.unet, &out.vae, &out.text_encoder};
  if (sdxl) components.push_back(&out.text_encoder_2);
  if (!folder.empty()) {
    for (SingleFileComponent* c : components) c->config_json = read_config_file(c->config_label);
    out.architecture = cat("configs of ", config_folder);
    return out;
  }
  // The U-Net decides the family; SD 2.x at v-prediction is the 768-v model; SDXL is trained at 1024.
  const std::string architecture = unet_architecture(out.unet.tensors);
  const int image = metadata_resolution(*file).value_or(
      architecture == "SDXL" ? 1024 : architecture == "SD 2.x" && prediction.type == "v_prediction" ? 768 : 512);
  const std::string inferred = cat(path, " (", architecture, ", inferred from its shapes)");
  const TensorView* projection = out.text_encoder_2.tensors.find("text_projection.weight");
  out.unet.config_json = infer_unet_config(out.unet.tensors, image / 8, projection ? projection->shape[0] : 0);
  out.vae.config_json = infer_vae_config(out.vae.tensors, image, sdxl);
  out.text_encoder.config_json = infer_clip_config(out.text_encoder.tensors, is_open_clip);
  if (sdxl) out.text_encoder_2.config_json = infer_clip_config(out.text_encoder_2.tensors, true);
  for (SingleFileComponent* c : components) c->config_label = inferred;
  out.architecture = architecture;
  return out;
}

}  // namespace

bool is_single_file_checkpoint(const std::string& path) {
  return !std::filesystem::is_directory(path) && std::filesystem::exists(path);
}

SingleFileCheckpoint open_single_file(const std::string& path, const std::string& config_folder) {
  return map_single_file(open_checkpoint_file(path, "checkpoint"), config_folder);
}

SingleFileCheckpoint read_single_file(SafeTensorsFile file, const std::string& config_folder) {
  return map_single_file(std::make_shared<const SafeTensorsFile>(std::move(file)), config_folder);
}

}  // namespace rtvd
