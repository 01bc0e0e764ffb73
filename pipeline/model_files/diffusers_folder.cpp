// model_index.json checked like every config (config_reader.h), then the files of the components it lists:
// a missing folder or file is named here rather than failing later in a component's loader.
#include "pipeline/model_files/diffusers_folder.h"

#include <array>
#include <filesystem>
#include <string_view>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/input_file.h"
#include "pipeline/model_files/json_text.h"
#include "pipeline/model_files/sharded_weights.h"

namespace rtvd {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A Stable Diffusion (or SDXL) pipeline's components, each [library, class] or [null, null] (none); rtvd finds
// the first seven, the others need no files.
constexpr std::array<std::string_view, 10> kComponents = {
    "unet", "text_encoder", "tokenizer", "vae", "scheduler", "text_encoder_2", "tokenizer_2",
    "safety_checker", "feature_extractor", "image_encoder"};
constexpr std::array<std::string_view, 7> kOtherKeys = {
    "_class_name", "_diffusers_version", "_name_or_path", "requires_safety_checker",
    "force_zeros_for_empty_prompt", "requires_aesthetics_score",
    "add_watermarker"};  // SDXL: diffusers' invisible watermark on its output images, null or a bool

// Whether model_index.json lists the component.
bool listed(const ConfigReader& r, std::string_view component) {
  const std::string key(component);
  if (!r.has(key.c_str())) return false;
  const json& v = r.required(key.c_str(), "");
  const auto pair_of = [&](auto is) { return v.is_array() && v.size() == 2 && is(v[0]) && is(v[1]); };
  if (pair_of([](const json& e) { return e.is_null(); })) return false;
  if (!pair_of([](const json& e) { return e.is_string(); }))
    r.fail_key(key, "[library, class] or [null, null]", describe_json(v));
  return true;
}

// The folder of a component that model_index.json lists: Error naming it when it is missing.
std::string component_dir(const ConfigReader& r, const std::string& root, std::string_view component) {
  const std::string dir = cat(root, "/", component);
  if (!fs::is_directory(dir))
    fail(r.label(), ": key '", component, "': the pipeline lists this component, but its folder ", dir, " is missing");
  return dir;
}

std::string required_file(const std::string& path, std::string_view what) {
  require_regular_file(path, cat("missing (", what, ")"));
  return path;
}

// SDXL's text side: both encoders and both tokenizers, and what the pipeline does with no negative prompt.
void find_sdxl_text_components(const ConfigReader& r, DiffusersFolder& f) {
  bool refiner = false;
  r.optional_bool("requires_aesthetics_score", refiner);
  if (refiner)
    r.fail_key("requires_aesthetics_score", "false (true is SDXL's refiner, conditioned on an aesthetic score, "
               "which rtvd does not run)", "true");
  for (std::string_view component : {"text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2"})
    if (!listed(r, component))
      fail(r.label(), ": key '", component, "': an SDXL pipeline needs both text encoders and both tokenizers "
           "(text_encoder/, tokenizer/, text_encoder_2/, tokenizer_2/), but this one lists no ", component,
           component == "text_encoder" ? " (a refiner has only the second encoder; rtvd does not run it)" : "");
  f.text_encoder_2_dir = component_dir(r, f.root, "text_encoder_2");
  f.tokenizer_2_dir = component_dir(r, f.root, "tokenizer_2");
  r.optional_bool("force_zeros_for_empty_prompt", f.force_zeros_for_empty_prompt);
}

}  // namespace

std::string component_weights(const std::string& dir, const std::string& stem, const std::string& pickle_stem,
                              const std::string& what) {
  for (const std::string variant : {"", "fp16"}) {
    const std::string single = cat(stem, variant.empty() ? "" : ".", variant, ".safetensors");
    for (const std::string& name : {shard_index_name(stem, variant), single})
      if (fs::is_regular_file(cat(dir, "/", name))) return cat(dir, "/", name);
  }
  for (const std::string& name : {pickle_stem + ".bin", pickle_stem + ".fp16.bin", pickle_stem + ".bin.index.json",
                                  pickle_stem + ".bin.index.fp16.json"})
    if (fs::exists(cat(dir, "/", name)))
      fail(dir, "/", name, ": the ", what, "'s weights are a pickle, which rtvd never unpickles (loading one can run "
           "code from the file): convert them to ", stem, ".safetensors");
  fail(dir, ": expected ", stem, ".safetensors or ", stem, ".fp16.safetensors, or shards with their index ",
       shard_index_name(stem, ""), " (the ", what, "'s weights)");
}

TensorSet open_component_weights(const std::string& path) {
  return is_shard_index(path) ? open_sharded_weights(path) : TensorSet(SafeTensorsFile::open(path));
}

bool is_diffusers_folder(const std::string& dir) { return fs::is_regular_file(dir + "/model_index.json"); }

void check_listed_class(const DiffusersFolder& f, std::string_view component, const std::string& config_file,
                        std::string_view config_class) {
  const auto listed = f.classes.find(component);
  if (listed == f.classes.end() || listed->second == config_class) return;
  fail(f.root, "/model_index.json: key '", component, "' lists class ", printable(listed->second), ", but ",
       config_file, " has _class_name ", printable(config_class), ": make them agree (diffusers would build the "
       "listed class from that config)");
}

DiffusersFolder open_diffusers_folder(const std::string& dir) {
  const std::string index = dir + "/model_index.json";
  const json root = parse_config_object(read_config_file(index), index);
  const ConfigReader r(root, index);
  // Pipelines whose U-Net takes latents, a timestep and a text context (SDXL's also its added embeddings; not
  // inpainting's masked latents).
  const size_t pipeline = r.choice("_class_name", {"StableDiffusionPipeline", "StableDiffusionImg2ImgPipeline",
                                                   "StableDiffusionXLPipeline", "StableDiffusionXLImg2ImgPipeline"});
  r.reject_unknown_keys(kComponents, kOtherKeys);
  bool ignored = false;
  r.optional_bool("requires_safety_checker", ignored);
  DiffusersFolder f;
  f.root = dir;
  f.sdxl = pipeline >= 2;
  for (std::string_view component : kComponents)
    if (listed(r, component)) f.classes.emplace(component, root[std::string(component)][1].get<std::string>());

  const json& unet = r.required("unet", R"(["diffusers", "UNet2DConditionModel"])");
  if (unet != json::array({"diffusers", "UNet2DConditionModel"}))
    r.fail_key("unet", R"(["diffusers", "UNet2DConditionModel"] (rtvd runs the U-Net))", describe_json(unet));

  const std::string unet_dir = component_dir(r, dir, "unet");
  f.unet_config = required_file(unet_dir + "/config.json", "the U-Net's config");
  f.unet_weights = component_weights(unet_dir, "diffusion_pytorch_model", "diffusion_pytorch_model", "U-Net");
  if (listed(r, "text_encoder")) f.text_encoder_dir = component_dir(r, dir, "text_encoder");
  if (listed(r, "tokenizer")) f.tokenizer_dir = component_dir(r, dir, "tokenizer");
  if (listed(r, "vae")) f.vae_dir = component_dir(r, dir, "vae");
  if (f.sdxl) {
    find_sdxl_text_components(r, f);
  } else {
    for (std::string_view component : {"text_encoder_2", "tokenizer_2"})
      if (listed(r, component))
        r.fail_key(component, "[null, null] or no key (an SD pipeline has one text encoder; SDXL's _class_name is "
                   "StableDiffusionXLPipeline)", describe_json(root[std::string(component)]));
  }
  if (listed(r, "scheduler"))
    f.scheduler_config = required_file(component_dir(r, dir, "scheduler") + "/scheduler_config.json",
                                       "the scheduler's config");
  return f;
}

}  // namespace rtvd
