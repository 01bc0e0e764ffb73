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
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/ldm_layout.h"

namespace rtvd {

namespace {

constexpr std::string_view kUNet = "model.diffusion_model.", kVae = "first_stage_model.",
                           kClip = "cond_stage_model.transformer.", kOpenClip = "cond_stage_model.model.";

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
    if (it->second == "stable-diffusion-v1" || it->second == "stable-diffusion-v2-512") said.push_back({"epsilon", it->first});
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
      clip{std::string(kClip), {}, file}, open_clip{std::string(kOpenClip), {}, file};
  for (const TensorView& t : file->tensors()) {
    const std::string_view n = t.name;
    if (n.starts_with(kUNet)) unet.tensors.push_back(&t);
    else if (n.starts_with(kVae)) vae.tensors.push_back(&t);
    else if (n.starts_with(kClip)) clip.tensors.push_back(&t);
    else if (n.starts_with(kOpenClip)) open_clip.tensors.push_back(&t);
    else if (!is_schedule_buffer(n) && !n.starts_with("model_ema.") && n != kVPredMarker)
      fail(path, ": tensor ", quote(n), ": not part of a Stable Diffusion checkpoint's U-Net (", kUNet, "), VAE (", kVae,
           ") or text encoder (", kClip, ", ", kOpenClip, ")");
  }
  for (const auto& [c, what] : {std::pair{&unet, "U-Net"}, std::pair{&vae, "VAE"}})
    if (c->tensors.empty()) fail(path, ": no ", what, " (no tensor ", c->prefix, "*): not a whole Stable Diffusion checkpoint");
  if (clip.tensors.empty() == open_clip.tensors.empty())
    fail(path, clip.tensors.empty() ? ": no text encoder (no tensor " : ": two text encoders (tensors ", kClip, "* ",
         clip.tensors.empty() ? "or " : "and ", kOpenClip, "*)");
  const bool is_open_clip = clip.tensors.empty();

  const Prediction prediction = prediction_type(*file);
  const std::string folder = config_folder.empty() ? "" : config_folder + "/";
  const auto config = [&](const char* component) { return cat(folder, component, "/config.json"); };
  int open_clip_layers = -1;
  if (is_open_clip && !folder.empty())
    open_clip_layers = load_clip_text_config(config("text_encoder")).num_hidden_layers;
  SingleFileCheckpoint out{
      {"", config("unet"), map_ldm_unet(unet)},
      {"", config("vae"), map_ldm_vae(vae)},
      {"", config("text_encoder"), is_open_clip ? map_open_clip(open_clip, open_clip_layers) : map_ldm_clip(clip)},
      is_open_clip ? "openclip" : "openai-clip",
      prediction.type,
      prediction.source,
      "",
  };
  // The U-Net attends to the text encoder's hidden states: the widths must agree, whatever the configs say.
  const TensorView* to_k = out.unet.tensors.find("mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight");
  const TensorView* token = out.text_encoder.tensors.find("embeddings.token_embedding.weight");
  if (to_k && token && to_k->shape.size() == 2 && token->shape.size() == 2 && to_k->shape[1] != token->shape[1])
    fail(path, ": the U-Net attends to a context of width ", to_k->shape[1], " (", out.unet.tensors.describe(to_k->name),
         ") but the text encoder's is ", token->shape[1], " (", out.text_encoder.tensors.describe(token->name), ")");

  if (!folder.empty()) {
    out.unet.config_json = read_config_file(out.unet.config_label);
    out.vae.config_json = read_config_file(out.vae.config_label);
    out.text_encoder.config_json = read_config_file(out.text_encoder.config_label);
    out.architecture = cat("configs of ", config_folder);
    return out;
  }
  // The U-Net decides the family; SD 2.x at v-prediction is the 768-v model.
  const std::string architecture = unet_architecture(out.unet.tensors);
  const int image = metadata_resolution(*file).value_or(
      architecture == "SD 2.x" && prediction.type == "v_prediction" ? 768 : 512);
  const std::string inferred = cat(path, " (", architecture, ", inferred from its shapes)");
  out.unet.config_json = infer_unet_config(out.unet.tensors, image / 8);
  out.vae.config_json = infer_vae_config(out.vae.tensors, image);
  out.text_encoder.config_json = infer_clip_config(out.text_encoder.tensors, is_open_clip);
  for (SingleFileComponent* c : {&out.unet, &out.vae, &out.text_encoder}) c->config_label = inferred;
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
