#include "pipeline/models/model.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "pipeline/model_files/cache_dir.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_folder.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/model_files/embedded_model.h"
#include "pipeline/model_files/single_file.h"
#include "pipeline/models/random_weights.h"

namespace rtvd {

namespace fs = std::filesystem;

namespace {

// "F16", "F16, F32": the dtypes of a component's tensors.
std::string dtypes_of(const TensorSet& t) {
  std::set<std::string> names;
  for (const TensorView& v : t.tensors()) names.insert(dtype_name(v.dtype));
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Elements per top-level module ("conv_in", "down_blocks.0", "text_model.encoder", ...) in first-seen order: the
// blocks of a U-Net's levels and the parts of a CLIP text model one by one, not as one container.
std::vector<std::pair<std::string, int64_t>> parameters_by_module(const TensorSet& t) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const TensorView& v : t.tensors()) {
    std::string module = v.name.substr(0, v.name.find('.'));
    if (module == "down_blocks" || module == "up_blocks" || module == "text_model")
      module = v.name.substr(0, v.name.find('.', module.size() + 1));
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& m) { return m.first == module; });
    if (it == out.end()) it = out.insert(out.end(), {module, 0});
    it->second += v.numel();
  }
  return out;
}

ModelComponent component(const std::string& name, const TensorSet& t, const std::string& source) {
  return {name, source, dtypes_of(t), t.parameters(), parameters_by_module(t)};
}

// A pixel-space model's weights: its U-Net, the one component.
void set_unet_weights(Model& m, TensorSet tensors) {
  m.components = {component("unet", tensors, tensors.label())};
  m.weights = std::make_unique<WeightStore>(std::move(tensors));
}

// An autoencoder folder (diffusers' vae/, or a TAESD download): config.json and its weights.
struct AutoencoderFolder {
  AutoencoderConfig config;
  TensorSet tensors;
};

AutoencoderFolder open_autoencoder_folder(const std::string& dir, const std::string& flag) {
  if (!fs::is_directory(dir))
    fail(flag, dir, ": not a folder (expected a diffusers AutoencoderKL or AutoencoderTiny folder: config.json and "
         "diffusion_pytorch_model.safetensors)");
  const std::string weights = component_weights(dir, "diffusion_pytorch_model", "diffusion_pytorch_model", "autoencoder");
  return {load_autoencoder_config(dir + "/config.json"), open_component_weights(weights)};
}

std::string taesd_folder(const std::string& model_path, bool sdxl) {
  std::string looked;
  for (const std::string& dir : taesd_folders(model_path, sdxl)) {
    if (fs::is_regular_file(dir + "/config.json")) return dir;
    looked += (looked.empty() ? "" : ", ") + dir;
  }
  fail("--vae tiny: no ", sdxl ? "TAESDXL" : "TAESD", " folder at ", looked, " (download madebyollin/",
       sdxl ? "taesdxl" : "taesd", " there, or give its folder: --vae DIR)");
}

// The latent model's components from their files: --vae replaces the checkpoint's autoencoder, --lora updates
// the U-Net and the text encoders, --prediction-type overrides the scheduler's; then the U-Net's and the
// autoencoder's tensors go into one store.
struct LatentParts {
  TensorSet unet;
  std::string unet_source;
  std::optional<AutoencoderFolder> autoencoder;  // the checkpoint's own, if it has one
  std::string autoencoder_source;
  std::optional<TextEncoderCheckpoint> text_encoder;
  std::string text_source;
  std::optional<TextEncoderCheckpoint> text_encoder_2;  // SDXL's second
  std::string text_2_source;
};

// Whether --vae keeps the checkpoint's own autoencoder (not given, or "full").
bool own_autoencoder(const ModelOptions& o) { return !o.vae || o.vae->kind == VaeChoice::Kind::Full; }

void finish_latent_model(Model& m, LatentParts parts, const ModelOptions& o) {
  if (!own_autoencoder(o)) {
    const bool tiny = o.vae->kind == VaeChoice::Kind::Tiny;
    const std::string dir = tiny ? taesd_folder(o.path, m.sdxl()) : o.vae->folder;
    parts.autoencoder = open_autoencoder_folder(dir, tiny ? "--vae tiny: " : "--vae ");
    parts.autoencoder_source = dir;
  }
  if (!parts.autoencoder)
    fail(m.source, ": the checkpoint has no autoencoder (vae/), which a latent model needs: give one with --vae DIR");
  for (const LoraSpec& lora : o.loras)
    apply_lora(lora, parts.unet, parts.text_encoder ? &parts.text_encoder->tensors : nullptr,
               parts.text_encoder_2 ? &parts.text_encoder_2->tensors : nullptr);
  if (o.prediction_type) m.scheduler->prediction = *o.prediction_type;
  if (o.timestep_spacing) m.scheduler->timestep_spacing = *o.timestep_spacing;

  m.autoencoder = parts.autoencoder->config;
  const int z = m.autoencoder->latent().channels;
  if (z != m.config.in_channels || m.config.out_channels != m.config.in_channels) {
    // The SD variants whose U-Net takes more than the latents, which rtvd does not run, by name.
    const bool predicts_latents = m.config.out_channels == z;
    const char* kind = predicts_latents && m.config.in_channels == 2 * z + 1
                           ? "; a U-Net that takes the latents, a masked image's and a mask is an inpainting model"
                       : predicts_latents && m.config.in_channels == 2 * z
                           ? "; a U-Net that takes the latents and an image's is an image-conditioned model "
                             "(InstructPix2Pix)"
                           : "";
    fail(parts.autoencoder_source, ": the autoencoder's ", z, " latent channels do not fit the U-Net's ",
         m.config.in_channels, " in and ", m.config.out_channels, " out", kind, *kind ? ", which rtvd does not run" : "");
  }
  m.components.push_back(component("unet", parts.unet, parts.unet_source));
  m.components.push_back(component(m.autoencoder->tiny() ? (m.sdxl() ? "vae (TAESDXL)" : "vae (TAESD)") : "vae",
                                   parts.autoencoder->tensors, parts.autoencoder_source));
  if (parts.text_encoder) {
    m.components.push_back(component("text_encoder", parts.text_encoder->tensors, parts.text_source));
    m.text_encoder = std::move(parts.text_encoder);
  }
  if (parts.text_encoder_2) {
    m.components.push_back(component("text_encoder_2", parts.text_encoder_2->tensors, parts.text_2_source));
    m.text_encoder_2 = std::move(parts.text_encoder_2);
  }
  for (const std::string& path : o.controlnets) {
    const size_t i = m.controlnets.size();
    ControlNetCheckpoint c = open_model_controlnet(path, m.config, parts.unet_source, m.pixels_per_latent());
    m.components.push_back(component(cat("controlnet.", i), c.weights, path));
    parts.unet.add_all(std::move(c.weights), controlnet_weight_prefix(i));
    m.controlnets.push_back(std::move(c.net));
  }
  parts.unet.add_all(std::move(parts.autoencoder->tensors));
  m.weights = std::make_unique<WeightStore>(std::move(parts.unet));
}

// The U-Net's dtype, for its config (diffusers saves every tensor of a model in one dtype).
DType unet_dtype(const TensorSet& t) {
  const TensorView* conv_in = t.find("conv_in.weight");
  if (!conv_in) fail(t.label(), ": no tensor 'conv_in.weight' (not a UNet2DConditionModel checkpoint)");
  return conv_in->dtype;
}

// An SDXL U-Net reads both text encoders: its context is their hidden states side by side, its added embedding
// the second's pooled projection and the six time ids, each embedded at addition_time_embed_dim.
void check_sdxl_text_widths(const ModelConfig& c, const std::string& unet_config, const ClipTextConfig& first,
                            const ClipTextConfig& second) {
  const int time_ids = ModelConfig::kTimeIds * c.addition_time_embed_dim;
  if (c.projection_class_embeddings_input_dim != time_ids + second.projection_dim)
    fail(unet_config, ": projection_class_embeddings_input_dim is ", c.projection_class_embeddings_input_dim,
         ", but the time ids (6 x addition_time_embed_dim = ", time_ids, ") and text_encoder_2's pooled projection "
         "(projection_dim ", second.projection_dim, ") make ", time_ids + second.projection_dim);
  if (c.cross_attention_dim != first.hidden_size + second.hidden_size)
    fail(unet_config, ": cross_attention_dim is ", c.cross_attention_dim, ", but the two text encoders' widths sum to ",
         first.hidden_size + second.hidden_size, " (text_encoder ", first.hidden_size, " + text_encoder_2 ",
         second.hidden_size, ")");
}

// An SDXL pipeline's U-Net takes SDXL's added conditioning, and only an SDXL pipeline's does.
void check_pipeline_matches_unet(const DiffusersFolder& f, const ModelConfig& c) {
  if (f.sdxl && !c.text_time())
    fail(f.unet_config, ": model_index.json names an SDXL pipeline, but this U-Net has no addition_embed_type "
         "\"text_time\" (the pooled text embedding and time ids SDXL's pipeline gives it)");
  if (!f.sdxl && c.text_time())
    fail(f.unet_config, ": an SDXL U-Net (addition_embed_type \"text_time\"), but model_index.json names a Stable "
         "Diffusion pipeline (one text encoder): expected _class_name StableDiffusionXLPipeline");
}

Model load_diffusers_model(const ModelOptions& o) {
  if (!o.config.empty())
    fail("--config ", o.config, ": only a single-file checkpoint takes other configs; ", o.path,
         " is a diffusers folder, whose own are read");
  const DiffusersFolder f = open_diffusers_folder(o.path);
  Model m;
  m.source = o.path;
  m.format = "diffusers folder";
  LatentParts parts{open_component_weights(f.unet_weights), f.unet_weights, {}, "", {}, "", {}, ""};
  m.config = parse_diffusers_unet_config(read_config_file(f.unet_config), f.unet_config, unet_dtype(parts.unet));
  m.config.name = fs::canonical(o.path).filename().string();
  check_pipeline_matches_unet(f, m.config);
  if (f.sdxl)  // from the encoders' configs, before any of their weights is read
    check_sdxl_text_widths(m.config, f.unet_config, load_clip_text_config(f.text_encoder_dir + "/config.json"),
                           load_clip_text_config(f.text_encoder_2_dir + "/config.json"));
  if (f.scheduler_config.empty())
    fail(f.root, "/model_index.json: lists no scheduler, whose scheduler_config.json says how the checkpoint was "
         "trained (betas, prediction type)");
  m.scheduler = load_scheduler_config(f.scheduler_config);
  check_listed_class(f, "scheduler", f.scheduler_config, m.scheduler->class_name);
  if (!f.vae_dir.empty() && own_autoencoder(o)) {
    parts.autoencoder = open_autoencoder_folder(f.vae_dir, "");
    check_listed_class(f, "vae", f.vae_dir + "/config.json",
                       parts.autoencoder->config.tiny() ? "AutoencoderTiny" : "AutoencoderKL");
    parts.autoencoder_source = f.vae_dir;
  }
  if (!f.text_encoder_dir.empty()) {
    parts.text_encoder = load_text_encoder_folder(f.text_encoder_dir);
    parts.text_source = f.text_encoder_dir;
    if (f.tokenizer_dir.empty())
      fail(f.root, "/model_index.json: lists a text_encoder but no tokenizer (its tokenizer/ folder)");
    m.tokenizer_dir = f.tokenizer_dir;
  }
  if (f.sdxl) {  // open_diffusers_folder has found both encoders and both tokenizers
    parts.text_encoder_2 = load_text_encoder_folder(f.text_encoder_2_dir);
    parts.text_2_source = f.text_encoder_2_dir;
    m.tokenizer_2_dir = f.tokenizer_2_dir;
    m.force_zeros_for_empty_prompt = f.force_zeros_for_empty_prompt;
  }
  finish_latent_model(m, std::move(parts), o);
  return m;
}

Model load_single_file_model(const ModelOptions& o) {
  SingleFileCheckpoint c = open_single_file(o.path, o.config);
  Model m;
  m.source = o.path;
  m.format = cat("single file, ", c.architecture);
  m.config = parse_diffusers_unet_config(c.unet.config_json, c.unet.config_label, unet_dtype(c.unet.tensors));
  m.config.name = fs::path(o.path).stem().string();
  const bool sdxl = c.text_encoder_layout == "sdxl";
  if (m.config.text_time() != sdxl)
    fail(c.unet.config_label, sdxl ? ": the U-Net has no addition_embed_type \"text_time\", but " : ": an SDXL U-Net "
         "(addition_embed_type \"text_time\"), but ", o.path, sdxl ? " holds SDXL's two text encoders" : " holds one text "
         "encoder (SDXL's are conditioner.embedders.0.transformer.* and conditioner.embedders.1.model.*)");
  // The scheduler: the config folder's, else SD's schedule with the prediction type the flag, the file's
  // metadata or the architecture gives (SD 1.x is epsilon; SD 2.x has epsilon and v-prediction checkpoints).
  const std::string folder_scheduler = o.config.empty() ? "" : o.config + "/scheduler/scheduler_config.json";
  if (!folder_scheduler.empty() && fs::is_regular_file(folder_scheduler)) {
    m.scheduler = load_scheduler_config(folder_scheduler);
  } else {
    std::optional<PredictionType> prediction = o.prediction_type;
    if (!prediction && !c.prediction_type.empty()) prediction = prediction_type_named(c.prediction_type);
    if (!prediction && (c.architecture == "SD 1.x" || c.architecture == "SDXL")) prediction = PredictionType::Epsilon;
    if (!prediction)
      fail(o.path, ": the file does not say whether its U-Net predicts noise or velocity (", c.architecture,
           " checkpoints are trained either way): give --prediction-type epsilon (SD 2.x base, SD-Turbo) or "
           "v_prediction (SD 2.x 768-v)");
    m.scheduler = default_scheduler_config(*prediction);
  }
  LatentParts parts{std::move(c.unet.tensors), o.path, {}, "", {}, "", {}, ""};
  if (own_autoencoder(o)) {
    parts.autoencoder = AutoencoderFolder{parse_autoencoder_config(c.vae.config_json, c.vae.config_label),
                                          std::move(c.vae.tensors)};
    parts.autoencoder_source = o.path;
  }
  parts.text_encoder = TextEncoderCheckpoint{parse_clip_text_config(c.text_encoder.config_json, c.text_encoder.config_label),
                                             std::move(c.text_encoder.tensors)};
  parts.text_source = o.path;
  // Single files carry no tokenizer: CLIP's published vocabulary, padded as the checkpoint's family pads
  // (SD 1.x with <|endoftext|>, SD 2.x's OpenCLIP with "!", id 0; SDXL's encoders each as these).
  m.tokenizer_pad = c.text_encoder_layout == "openclip" ? "!" : "<|endoftext|>";
  if (sdxl) {
    const ClipTextConfig second = parse_clip_text_config(c.text_encoder_2.config_json, c.text_encoder_2.config_label);
    check_sdxl_text_widths(m.config, c.unet.config_label, parts.text_encoder->config, second);
    parts.text_encoder_2 = TextEncoderCheckpoint{second, std::move(c.text_encoder_2.tensors)};
    parts.text_2_source = o.path;
  }
  finish_latent_model(m, std::move(parts), o);
  return m;
}

// rtvd's own pixel-space models take none of the latent models' flags.
void refuse_latent_flags(const ModelOptions& o, const std::string& what) {
  const char* flag = o.vae ? "--vae" : !o.loras.empty() ? "--lora" : o.prediction_type ? "--prediction-type"
                     : o.timestep_spacing ? "--timestep-spacing" : !o.config.empty() ? "--config"
                     : !o.controlnets.empty() ? "--controlnet" : nullptr;
  if (flag) fail(flag, ": ", what, " is a pixel-space model (no autoencoder, scheduler or text encoder)");
}

}  // namespace

VaeChoice parse_vae_choice(const std::string& value) {
  if (value.empty()) fail("--vae: expected full, tiny or a folder, got an empty value");
  if (value == "full") return {VaeChoice::Kind::Full, ""};
  if (value == "tiny") return {VaeChoice::Kind::Tiny, ""};
  return {VaeChoice::Kind::Folder, value};
}

bool Model::vae_overflows_fp16() const {
  return sdxl() && latent() && !autoencoder->tiny() && autoencoder->force_upcast();
}

std::string fp16_vae_advice() {
  return "SDXL's VAE (force_upcast in its config) overflows in fp16, which the GPU runs: give an fp16-fixed SDXL "
         "VAE with --vae DIR (such as madebyollin/sdxl-vae-fp16-fix), or TAESDXL with --vae tiny";
}

int Model::native_size() const {
  return config.sample_size * pixels_per_latent();
}

int Model::size_multiple() const {
  return config.size_multiple() * pixels_per_latent();
}

std::vector<std::string> taesd_folders(const std::string& model_path, bool sdxl) {
  const char* name = sdxl ? "taesdxl" : "taesd";
  std::vector<std::string> dirs;
  if (!model_path.empty()) {
    const fs::path p = fs::absolute(model_path).lexically_normal();
    const fs::path beside = (p.has_filename() ? p.parent_path() : p.parent_path().parent_path()) / name;
    dirs.push_back(beside.string());
  }
  if (const std::string cache = rtvd_cache_dir(); !cache.empty()) dirs.push_back(cache + "/" + name);
  return dirs;
}

Model load_model(const ModelOptions& o) {
  if (o.path.empty()) {
    refuse_latent_flags(o, "the embedded default model");
    return load_embedded_model();
  }
  if (fs::is_directory(o.path)) {
    if (is_diffusers_folder(o.path)) return load_diffusers_model(o);
    // unet/ of a diffusers folder has a config.json too, in diffusers' format: say what to pass instead.
    if (!fs::exists(o.path + "/weights.safetensors") && is_diffusers_folder(o.path + "/.."))
      fail("--model ", o.path, ": a component of the diffusers folder ", fs::canonical(o.path + "/..").string(),
           ", which is what --model takes");
    refuse_latent_flags(o, o.path);
    Model m;
    m.source = o.path;
    m.format = "rtvd";
    m.config = load_model_config(o.path + "/config.json");
    set_unet_weights(m, TensorSet(SafeTensorsFile::open(o.path + "/weights.safetensors")));
    return m;
  }
  // A file: a single-file checkpoint (pickles are refused by their name inside), never any other format.
  const std::string ext = fs::path(o.path).extension().string();
  if (fs::is_regular_file(o.path) && ext != ".safetensors" && ext != ".ckpt" && ext != ".pt" && ext != ".pth" &&
      ext != ".bin" && ext != ".pkl")
    fail("--model ", o.path, ": expected a folder (a diffusers folder with model_index.json, or config.json and "
         "weights.safetensors in it) or a single-file .safetensors checkpoint");
  if (is_single_file_checkpoint(o.path)) return load_single_file_model(o);
  fail("--model ", o.path, ": no such folder or file (expected a diffusers folder, a single-file .safetensors "
       "checkpoint, or a folder with config.json and weights.safetensors)");
}

Model load_embedded_model() {
  const EmbeddedModel e = embedded_model();
  Model m;
  m.source = "embedded default model";
  m.format = "rtvd";
  m.config = parse_model_config(std::string(e.config), "embedded default model config.json");
  set_unet_weights(m, TensorSet(SafeTensorsFile::from_memory(e.weights.data(), e.weights.size(),
                                                             "embedded default model weights.safetensors")));
  return m;
}

Model random_model(const ModelConfig& cfg, uint64_t seed, const std::string& source) {
  Model m;
  m.source = source;
  m.format = "random weights";
  m.config = cfg;
  set_unet_weights(m, TensorSet(random_checkpoint(cfg, seed)));
  return m;
}

}  // namespace rtvd
