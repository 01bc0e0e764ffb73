// A model = its configs and weights: the embedded default model, a directory of config.json +
// weights.safetensors (rtvd's pixel-space U-Nets), a diffusers Stable Diffusion or SDXL folder (model_index.json,
// unet/, vae/, text_encoder/, tokenizer/, scheduler/; SDXL's also text_encoder_2/, tokenizer_2/) or a
// single-file SD checkpoint in the original layout.
// Latent (SD-class) models add the autoencoder, the scheduler and the text encoder to the U-Net.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/graph/weights.h"
#include "pipeline/model_files/autoencoder_config.h"
#include "pipeline/model_files/lora.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/models/clip_text.h"
#include "pipeline/models/model_controlnet.h"
#include "pipeline/samplers/scheduler_config.h"

namespace rtvd {

// --vae: the autoencoder a latent model decodes with.
struct VaeChoice {
  enum class Kind {
    Full,    // "full": the checkpoint's own
    Tiny,    // "tiny": TAESD (TAESDXL for SDXL), from the first of taesd_folders() that has one
    Folder,  // a diffusers AutoencoderKL or AutoencoderTiny folder
  };
  Kind kind = Kind::Full;
  std::string folder;  // Kind::Folder's
  bool operator==(const VaeChoice&) const = default;
};
// "full", "tiny" or a folder; Error naming --vae for an empty value.
VaeChoice parse_vae_choice(const std::string& value);

// What --model, --vae, --lora, --prediction-type, --timestep-spacing, --config and --controlnet ask for, parsed by the CLI.
// A flag not given is nullopt, or empty; a latent model's flag given for a pixel-space model is an Error
// naming it, as is a --vae folder or --lora file that does not load.
struct ModelOptions {
  std::string path;                                 // "" = the embedded default model
  std::optional<VaeChoice> vae;                     // not given: the checkpoint's, as "full"
  std::vector<LoraSpec> loras;                      // merged in order
  std::optional<PredictionType> prediction_type;    // overrides the checkpoint's (scheduler config or metadata)
  std::optional<TimestepSpacing> timestep_spacing;  // overrides the checkpoint's scheduler config's
  std::string config;                               // single files: a diffusers folder whose component configs to use
  std::vector<std::string> controlnets;             // ControlNet folders or single files, in order
};

// A component as rtvd info shows it: "unet", "vae", "text_encoder", ...; where it came from; its parameters
// (the elements of its tensors), and the same per top-level module, which sum to them.
struct ModelComponent {
  std::string name, source, dtypes;  // dtypes: "F16", "F16, F32"
  int64_t parameters = 0;
  std::vector<std::pair<std::string, int64_t>> modules;  // ("conv_in", n), ("down_blocks.0", n), ...
};

struct Model {
  std::string source;  // the path, or "embedded default model"
  std::string format;  // "rtvd", "diffusers folder", "single file (SD 1.x)", ...
  ModelConfig config;  // the U-Net
  // The U-Net's tensors and the autoencoder's, in one store (their names do not collide: diffusers' unet/
  // and vae/ names), so that one frame graph reads both.
  std::unique_ptr<WeightStore> weights;
  std::optional<TextEncoderCheckpoint> text_encoder;  // moved out by the engine
  std::string tokenizer_dir;                          // "" = CLIP's vocabulary shipped in assets/...
  std::string tokenizer_pad = "<|endoftext|>";        // ...padded with this token
  // SDXL (a U-Net with the text_time added embedding): the second text encoder (CLIPTextModelWithProjection,
  // moved out by the engine) and its tokenizer, and what no negative prompt conditions on (model_index.json).
  std::optional<TextEncoderCheckpoint> text_encoder_2;
  std::string tokenizer_2_dir;
  bool force_zeros_for_empty_prompt = true;
  std::optional<AutoencoderConfig> autoencoder;       // latent models
  std::optional<SchedulerConfig> scheduler;           // latent models
  // The ControlNets (latent models), their weights in `weights` under controlnet_weight_prefix(i).
  std::vector<ModelControlNet> controlnets;
  // The U-Net first ("unet"), then the autoencoder, the text encoder(s) ("text_encoder", "text_encoder_2") and the
  // ControlNets ("controlnet.0", ...).
  std::vector<ModelComponent> components;

  const ModelComponent& unet() const { return components.at(0); }

  bool latent() const { return autoencoder.has_value(); }
  bool sdxl() const { return config.text_time(); }  // conditioned on a pooled text embedding and time ids too
  // An SDXL model decoding with a full VAE whose config says force_upcast (SDXL's own): diffusers decodes it in
  // fp32, since its trained decoder overflows fp16. SD 1.x/2.x's configs default force_upcast to true as well,
  // but their decoders stay within fp16, so only SDXL's counts.
  bool vae_overflows_fp16() const;
  // The image as the frame sees it: a pixel-space model's autoencoder is the identity (one latent per pixel).
  int image_channels() const { return latent() ? 3 : config.in_channels; }
  int pixels_per_latent() const { return latent() ? autoencoder->latent().pixels_per_latent : 1; }
  // The image size it was trained at, and the multiple every image side must be.
  int native_size() const;
  int size_multiple() const;
};

// The cause and the fix when vae_overflows_fp16() on the GPU (fp16 activations), for the frame's non-finite
// error and the start-up note: one sentence, no newline.
std::string fp16_vae_advice();

Model load_model(const ModelOptions& options);
Model load_embedded_model();
// cfg's architecture with the weights of random_checkpoint(cfg, seed) (random_weights.h).
Model random_model(const ModelConfig& cfg, uint64_t seed, const std::string& source);

// Where --vae tiny looks for TAESD (diffusers' AutoencoderTiny folder, madebyollin/taesd): a taesd/ folder
// beside the model, else $RTVD_CACHE_DIR/taesd (or $XDG_CACHE_HOME/rtvd/taesd, ~/.cache/rtvd/taesd). An SDXL
// model's latents are not SD's, so it looks for TAESDXL (madebyollin/taesdxl) in taesdxl/ folders instead.
std::vector<std::string> taesd_folders(const std::string& model_path, bool sdxl);

}  // namespace rtvd
