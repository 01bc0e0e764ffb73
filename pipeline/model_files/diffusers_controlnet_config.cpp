// diffusers' ControlNetModel config -> ControlNetConfig: the encoder's keys as the U-Net's
// (read_diffusers_encoder_config), then the control image's.
#include "pipeline/model_files/diffusers_controlnet_config.h"

#include <array>
#include <string_view>

#include "base/error.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_folder.h"
#include "pipeline/model_files/diffusers_unet_config.h"

namespace rtvd {

namespace {

constexpr std::array<std::string_view, 4> kControlNetKeys = {
    "conditioning_channels", "conditioning_embedding_out_channels", "controlnet_conditioning_channel_order",
    "global_pool_conditions"};

}  // namespace

ControlNetConfig parse_diffusers_controlnet_config(const std::string& json_text, const std::string& label,
                                                   DType dtype) {
  const nlohmann::json root = parse_config_object(json_text, label);
  const ConfigReader r(root, label);
  ControlNetConfig c;
  c.encoder.name = label;
  c.encoder.dtype = dtype;
  read_diffusers_encoder_config(r, "ControlNetModel", kControlNetKeys, c.encoder);
  c.encoder.out_channels = c.encoder.in_channels;
  c.encoder.sample_size = c.encoder.size_multiple();
  check_model_config(c.encoder, r);

  r.optional_integer("conditioning_channels", 1, kMaxImageChannels, c.conditioning_channels);
  c.conditioning_embedding_out_channels = {16, 32, 96, 256};
  if (r.has("conditioning_embedding_out_channels"))
    c.conditioning_embedding_out_channels =
        r.integer_array("conditioning_embedding_out_channels", kMaxLevels, 1, kMaxChannels);
  if (r.has("controlnet_conditioning_channel_order")) {
    const nlohmann::json& order = r.required("controlnet_conditioning_channel_order", "");
    if (order != "rgb")
      r.fail_key("controlnet_conditioning_channel_order",
                 R"("rgb" (rtvd gives the control image as RGB; BGR ControlNets are not supported))",
                 describe_json(order));
  }
  r.optional_bool("global_pool_conditions", c.global_pool_conditions);
  return c;
}

ControlNetFolder open_controlnet_folder(const std::string& dir) {
  const std::string config = dir + "/config.json";
  const std::string text = read_config_file(config);
  TensorSet weights = open_component_weights(
      component_weights(dir, "diffusion_pytorch_model", "diffusion_pytorch_model", "ControlNet"));
  const TensorView* conv_in = weights.find("conv_in.weight");
  if (!conv_in) fail(weights.label(), ": no tensor 'conv_in.weight' (not a ControlNetModel checkpoint)");
  ControlNetFolder f{parse_diffusers_controlnet_config(text, config, conv_in->dtype), std::move(weights)};
  return f;
}

}  // namespace rtvd
