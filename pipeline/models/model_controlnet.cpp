#include "pipeline/models/model_controlnet.h"

#include <filesystem>

#include "base/error.h"
#include "pipeline/model_files/controlnet_single_file.h"

namespace rtvd {

namespace fs = std::filesystem;

namespace {

std::string list(const std::vector<int>& v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i) out += cat(i ? ", " : "", v[i]);
  return out + ")";
}

// The first field of the net's encoder that is not the U-Net's, as "NAME: the net's A, the U-Net's B"; "" when
// the encoder fits (its skips and mid block have the U-Net's shapes, its context and added embedding its inputs).
std::string encoder_mismatch(const ModelConfig& net, const ModelConfig& unet) {
  const auto differ = [](const char* name, const auto& a, const auto& b) { return cat(name, ": the net's ", a, ", the model's ", b); };
  if (net.cross_attention_dim != unet.cross_attention_dim)
    return differ("cross_attention_dim", net.cross_attention_dim, unet.cross_attention_dim);
  if (net.block_out_channels != unet.block_out_channels)
    return differ("block_out_channels", list(net.block_out_channels), list(unet.block_out_channels));
  if (net.layers_per_block != unet.layers_per_block)
    return differ("layers_per_block", net.layers_per_block, unet.layers_per_block);
  if (net.in_channels != unet.in_channels) return differ("in_channels", net.in_channels, unet.in_channels);
  if (net.text_time() != unet.text_time())
    return differ("addition_embed_type", net.text_time() ? "\"text_time\" (SDXL)" : "none",
                  unet.text_time() ? "\"text_time\" (SDXL)" : "none");
  if (net.text_time() && net.projection_class_embeddings_input_dim != unet.projection_class_embeddings_input_dim)
    return differ("projection_class_embeddings_input_dim", net.projection_class_embeddings_input_dim,
                  unet.projection_class_embeddings_input_dim);
  return "";
}

}  // namespace

std::string controlnet_weight_prefix(size_t index) { return cat("controlnet.", index, "."); }

ControlNetCheckpoint open_model_controlnet(const std::string& path, const ModelConfig& cfg,
                                          const std::string& unet_source, int pixels_per_latent) {
  ModelControlNet net;
  net.source = path;
  TensorSet weights(path);
  if (fs::is_directory(path)) {
    ControlNetFolder f = open_controlnet_folder(path);
    net.config = std::move(f.config);
    net.format = "diffusers folder";
    weights = std::move(f.weights);
  } else if (fs::is_regular_file(path)) {
    ControlNetSingleFile f = open_controlnet_single_file(path);
    const TensorView* conv_in = f.controlnet.tensors.find("conv_in.weight");
    if (!conv_in) fail("--controlnet ", path, ": no tensor 'conv_in.weight' (not a ControlNet)");
    net.config = parse_diffusers_controlnet_config(f.controlnet.config_json, f.controlnet.config_label, conv_in->dtype);
    net.format = cat("single file, ", f.architecture);
    weights = std::move(f.controlnet.tensors);
  } else {
    fail("--controlnet ", path, ": no such folder or file (expected a diffusers ControlNet folder or a single "
         ".safetensors file)");
  }
  if (const std::string why = encoder_mismatch(net.config.encoder, cfg); !why.empty())
    fail("--controlnet ", path, ": a ControlNet for another architecture than the model's U-Net (", unet_source,
         "): ", why);
  if (net.config.image_factor() != pixels_per_latent)
    fail("--controlnet ", path, ": its conditioning embedding reads a control image ", net.config.image_factor(),
         " times the latents' size, the model's image is ", pixels_per_latent, " times");
  return {std::move(net), std::move(weights)};
}

}  // namespace rtvd
