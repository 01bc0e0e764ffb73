#include "pipeline/model_files/controlnet_single_file.h"

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/checkpoint_file.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/dotted_name.h"
#include "pipeline/model_files/ldm_layout.h"

namespace rtvd {

namespace {

constexpr std::string_view kPrefix = "control_model.", kHint = "input_hint_block.", kZeroConvs = "zero_convs.",
                           kMidOut = "middle_block_out.0.", kUNet = "model.diffusion_model.",
                           kDiffusersHint = "controlnet_cond_embedding.";
// ControlNet's hint block: Conv, SiLU, Conv, SiLU, ..., Conv: 8 convs at the even indices 0 to 14, which diffusers
// names conv_in, blocks.0 to 5 and conv_out (conditioning_embedding_out_channels of four widths).
constexpr int kHintConvs = 8;
// SDXL's pooled text embedding (its second text encoder's projection), beside six time ids in the added embedding.
constexpr int64_t kSdxlPooledWidth = 1280;

// rest when it is "weight" or "bias", else "".
std::string_view weight_or_bias(std::string_view rest) {
  return rest == "weight" || rest == "bias" ? rest : std::string_view();
}

// The tensors of a ControlNet in the original layout, under rel names (the prefix cut), sorted by role.
struct OriginalControlNet {
  std::map<int, std::vector<const TensorView*>> hint, zero_convs;  // by conv index
  std::vector<const TensorView*> mid_out;
  LdmComponent unet;  // time_embed, label_emb, input_blocks, middle_block: map_ldm_unet's
};

OriginalControlNet sort_tensors(const std::shared_ptr<const SafeTensorsFile>& file, const std::string& prefix) {
  const std::string& path = file->label();
  OriginalControlNet out{{}, {}, {}, {prefix, {}, file}};
  for (const TensorView& t : file->tensors()) {
    if (!t.name.starts_with(prefix)) continue;  // beside control_model.: the rest of a training checkpoint
    const std::string_view rel = std::string_view(t.name).substr(prefix.size());
    const std::vector<std::string_view> parts = split_name(rel);
    if (rel.starts_with(kHint) || rel.starts_with(kZeroConvs)) {
      const bool hint = rel.starts_with(kHint);
      const int i = name_index(parts[1]);
      const bool fits = hint ? parts.size() == 3 && i >= 0 && i % 2 == 0 && i < 2 * kHintConvs
                             : parts.size() == 4 && i >= 0 && parts[2] == "0";
      if (!fits || weight_or_bias(parts.back()).empty())
        fail(path, ": tensor ", quote(t.name), hint ? ": expected the hint block's convs, input_hint_block.0 to 14 by 2 "
                                                      "(SiLU between them), each a weight and a bias"
                                                    : ": expected a zero conv, zero_convs.N.0.weight or .bias");
      (hint ? out.hint : out.zero_convs)[i].push_back(&t);
    } else if (rel.starts_with(kMidOut) && !weight_or_bias(rel.substr(kMidOut.size())).empty()) {
      out.mid_out.push_back(&t);
    } else if (parts[0] == "output_blocks" || parts[0] == "out") {
      fail(path, ": tensor ", quote(t.name), ": a U-Net's up path or output, which a ControlNet does not have "
           "(is this a Stable Diffusion checkpoint?)");
    } else {
      out.unet.tensors.push_back(&t);
    }
  }
  return out;
}

// convs[i], its weight and bias both, else an Error naming the one missing (module + "weight" or "bias").
const std::vector<const TensorView*>& conv_at(const std::map<int, std::vector<const TensorView*>>& convs, int i,
                                              const std::string& path, const std::string& module, const std::string& why) {
  const auto conv = convs.find(i);
  if (conv != convs.end() && conv->second.size() == 2) return conv->second;
  const bool has_weight =
      conv != convs.end() && !conv->second.empty() && split_name(conv->second.front()->name).back() == "weight";
  fail(path, ": no tensor ", module, has_weight ? "bias" : "weight", ": ", why);
}

// Adds `conv`'s weight and bias (the tensors of one original module) under diffusers' name `module`.
void add_conv(TensorSet& set, const std::vector<const TensorView*>& conv, const std::string& module,
              const std::shared_ptr<const SafeTensorsFile>& file) {
  for (const TensorView* t : conv) set.add(cat(module, ".", split_name(t->name).back()), *t, t->name, file);
}

// The conv's weight (out, in, k, k) and bias (out) as the set names them, of channels in and out; out read off
// the weight when 0.
int64_t check_conv(const TensorSet& set, const std::string& module, int64_t out, int64_t in, int64_t k) {
  if (out == 0) out = set.get_rank(module + ".weight", 4).shape[0];
  if (out <= 0 || in <= 0)
    fail(set.label_of(module + ".weight"), ": tensor ", set.describe(module + ".weight"), ": a conv of no channels");
  set.get_float(module + ".weight", std::vector<int64_t>{out, in, k, k});
  set.get_float(module + ".bias", std::vector<int64_t>{out});
  return out;
}

ControlNetSingleFile map_controlnet(std::shared_ptr<const SafeTensorsFile> file, const std::string& config_folder) {
  const std::string& path = file->label();
  bool prefixed = false;
  for (const TensorView& t : file->tensors()) prefixed = prefixed || t.name.starts_with(kPrefix);
  if (!prefixed) {
    if (!controlnet_tensor(*file)) {
      for (const TensorView& t : file->tensors())
        if (t.name.starts_with(kUNet))
          fail(path, ": tensor ", quote(t.name), ": a Stable Diffusion checkpoint (its U-Net, ", kUNet,
               "*), not a ControlNet (", kPrefix, "input_hint_block.*, or input_hint_block.* alone)");
      fail(path, ": no ControlNet tensor (", kPrefix, kHint, "* or ", kHint, "*): not a ControlNet in the original layout");
    }
    if (const TensorView* t = file->find(cat(kDiffusersHint, "conv_in.weight")))
      fail(path, ": tensor ", quote(t->name), ": a ControlNet under diffusers' names: give its folder (this file as "
           "diffusion_pytorch_model.safetensors beside its config.json)");
  }
  const std::string prefix(prefixed ? kPrefix : "");
  OriginalControlNet original = sort_tensors(file, prefix);

  // The copy of the U-Net's encoder (ldm_unet.cpp), then the hint block and the zero convs.
  if (original.unet.tensors.empty())
    fail(path, ": no encoder (no tensor ", prefix, "input_blocks.*): a ControlNet holds a copy of its U-Net's");
  TensorSet set = map_ldm_unet(original.unet);
  for (int i = 0; i < kHintConvs; ++i) {
    add_conv(set, conv_at(original.hint, 2 * i, path, cat(prefix, kHint, 2 * i, "."),
                          "a ControlNet's hint block has 8 convs, input_hint_block.0 to 14 by 2"),
             i == 0 ? "controlnet_cond_embedding.conv_in"
                    : i == kHintConvs - 1 ? "controlnet_cond_embedding.conv_out" : cat("controlnet_cond_embedding.blocks.", i - 1),
             file);
  }
  add_conv(set, conv_at({{0, original.mid_out}}, 0, path, cat(prefix, kMidOut), "a ControlNet's zero conv after its mid block"),
           "controlnet_mid_block", file);

  // A zero conv after each block of the encoder, in order: conv_in, then each level's ResNets and downsampler.
  std::vector<std::string> blocks = {"conv_in"};
  for (int l = 0; set.find(cat("down_blocks.", l, ".resnets.0.conv2.weight")); ++l) {
    for (int j = 0; set.find(cat("down_blocks.", l, ".resnets.", j, ".conv2.weight")); ++j)
      blocks.push_back(cat("down_blocks.", l, ".resnets.", j, ".conv2"));
    if (set.find(cat("down_blocks.", l, ".downsamplers.0.conv.weight"))) blocks.push_back(cat("down_blocks.", l, ".downsamplers.0.conv"));
  }
  for (const auto& [i, conv] : original.zero_convs) {
    if (size_t(i) >= blocks.size())
      fail(path, ": tensor ", quote(conv.front()->name), ": a zero conv past the encoder's ", blocks.size(),
           " blocks (zero_convs.0 to ", blocks.size() - 1, ")");
    add_conv(set, conv, cat("controlnet_down_blocks.", i), file);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    conv_at(original.zero_convs, int(i), path, cat(prefix, kZeroConvs, i, ".0."),
            cat("a ControlNet has a zero conv after each of its encoder's ", blocks.size(), " blocks (",
                set.describe(blocks[i] + ".weight"), " is block ", i, ")"));
    const int64_t c = set.get_rank(blocks[i] + ".weight", 4).shape[0];
    check_conv(set, cat("controlnet_down_blocks.", i), c, c, 1);
  }
  const int64_t mid = set.get_rank("mid_block.resnets.1.conv2.weight", 4).shape[0];
  check_conv(set, "controlnet_mid_block", mid, mid, 1);

  // The hint block's widths chain from the control image's channels to the encoder's first width.
  const std::string e = "controlnet_cond_embedding.";
  const int64_t image_channels = set.get_rank(e + "conv_in.weight", 4).shape[1];
  std::vector<int64_t> widths = {check_conv(set, e + "conv_in", 0, image_channels, 3)};
  for (int b = 0; b < kHintConvs - 2; b += 2) {
    check_conv(set, cat(e, "blocks.", b), widths.back(), widths.back(), 3);
    widths.push_back(check_conv(set, cat(e, "blocks.", b + 1), 0, widths.back(), 3));
  }
  check_conv(set, e + "conv_out", set.get_rank("conv_in.weight", 4).shape[0], widths.back(), 3);

  ControlNetSingleFile out{{"", "", std::move(set)}, ""};
  if (!config_folder.empty()) {
    out.controlnet.config_label = config_folder + "/config.json";
    out.controlnet.config_json = read_config_file(out.controlnet.config_label);
    out.architecture = cat("config of ", config_folder);
    return out;
  }
  const TensorSet& tensors = out.controlnet.tensors;
  out.architecture = unet_architecture(tensors, "the folder of a diffusers ControlNet whose config.json describes it");
  const bool sdxl = out.architecture == "SDXL";
  if (const TensorView* add = tensors.find("add_embedding.linear_1.weight"); add && !sdxl)
    fail(path, ": tensor ", tensors.describe(add->name), ": an added embedding, which only SDXL's ControlNets take, in a ",
         out.architecture, " ControlNet");
  nlohmann::json config = infer_unet_down_config(tensors, sdxl ? kSdxlPooledWidth : 0);
  config["_class_name"] = "ControlNetModel";
  config["conditioning_channels"] = image_channels;
  config["conditioning_embedding_out_channels"] = widths;
  out.controlnet.config_json = config.dump(2);
  out.controlnet.config_label = cat(path, " (", out.architecture, " ControlNet, inferred from its shapes)");
  return out;
}

}  // namespace

const TensorView* controlnet_tensor(const SafeTensorsFile& file) {
  for (const TensorView& t : file.tensors()) {
    std::string_view n = t.name;
    if (n.starts_with(kPrefix)) n.remove_prefix(kPrefix.size());
    if (n.starts_with(kHint) || n.starts_with(kZeroConvs) || n.starts_with(kDiffusersHint) ||
        n.starts_with("controlnet_down_blocks."))
      return &t;
  }
  return nullptr;
}

ControlNetSingleFile open_controlnet_single_file(const std::string& path, const std::string& config_folder) {
  return map_controlnet(open_checkpoint_file(path, "ControlNet"), config_folder);
}

ControlNetSingleFile read_controlnet_single_file(SafeTensorsFile file, const std::string& config_folder) {
  return map_controlnet(std::make_shared<const SafeTensorsFile>(std::move(file)), config_folder);
}

}  // namespace rtvd
