#include "pipeline/model_files/lora.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/checkpoint_file.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/ldm_layout.h"

namespace rtvd {

namespace {

enum class Component { UNet, TextEncoder, TextEncoder2 };
enum class Role { Down, Up, Alpha };

const char* component_name(Component c) {
  return c == Component::UNet ? "U-Net" : c == Component::TextEncoder ? "text encoder" : "second text encoder (text_encoder_2)";
}

// A key of the file, split: which model part, the module as the file writes it, and what the tensor is.
struct LoraKey {
  Component component;
  std::string module;
  bool underscored;  // kohya: the module's dots written as underscores
  Role role;
};

// The factor suffixes of the diffusers/PEFT formats, and kohya's.
constexpr std::pair<std::string_view, Role> kDottedFactors[] = {
    {".lora_A.weight", Role::Down},
    {".lora_B.weight", Role::Up},
    {".lora.down.weight", Role::Down},
    {".lora.up.weight", Role::Up},
    {".lora_linear_layer.down.weight", Role::Down},
    {".lora_linear_layer.up.weight", Role::Up},
    {".alpha", Role::Alpha},
};
constexpr std::pair<std::string_view, Role> kKohyaFactors[] = {
    {".lora_down.weight", Role::Down},
    {".lora_up.weight", Role::Up},
    {".alpha", Role::Alpha},
};
// diffusers' first attention-processor LoRAs: <attention>.processor.to_q_lora.down.weight, the projection's
// module in the U-Net (Attention) and in the text encoder (CLIPAttention).
struct ProcessorFactor {
  std::string_view suffix, unet_module, text_module;
};
constexpr ProcessorFactor kProcessorFactors[] = {
    {".to_q_lora", ".to_q", ".q_proj"},
    {".to_k_lora", ".to_k", ".k_proj"},
    {".to_v_lora", ".to_v", ".v_proj"},
    {".to_out_lora", ".to_out.0", ".out_proj"},
};

std::optional<LoraKey> parse_key(std::string_view key) {
  LoraKey k{Component::UNet, "", false, Role::Down};
  // kohya: "lora_unet_<module>" or "lora_te_<module>" (in its SDXL files "lora_te1_" and "lora_te2_"), then the
  // factor.
  for (const auto& [prefix, component] : {std::pair{std::string_view("lora_unet_"), Component::UNet},
                                          std::pair{std::string_view("lora_te_"), Component::TextEncoder},
                                          std::pair{std::string_view("lora_te1_"), Component::TextEncoder},
                                          std::pair{std::string_view("lora_te2_"), Component::TextEncoder2}}) {
    if (!key.starts_with(prefix)) continue;
    const size_t dot = key.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    for (const auto& [suffix, role] : kKohyaFactors)
      if (key.substr(dot) == suffix) return LoraKey{component, std::string(key.substr(prefix.size(), dot - prefix.size())), true, role};
    return std::nullopt;
  }
  if (key.starts_with("unet.")) {
    key.remove_prefix(5);
  } else if (key.starts_with("text_encoder.")) {
    key.remove_prefix(13);
    k.component = Component::TextEncoder;
  } else if (key.starts_with("text_encoder_2.")) {
    key.remove_prefix(15);
    k.component = Component::TextEncoder2;
  }
  for (const auto& [suffix, role] : kDottedFactors)
    if (key.ends_with(suffix)) {
      k.module = std::string(key.substr(0, key.size() - suffix.size()));
      k.role = role;
      break;
    }
  if (k.module.empty())
    for (const ProcessorFactor& p : kProcessorFactors)
      for (const auto& [end, role] : {std::pair{".down.weight", Role::Down}, std::pair{".up.weight", Role::Up}}) {
        const std::string suffix = cat(p.suffix, end);
        if (!key.ends_with(suffix)) continue;
        std::string attention(key.substr(0, key.size() - suffix.size()));
        if (attention.ends_with(".processor")) attention.resize(attention.size() - 10);
        k.module = attention + std::string(k.component == Component::UNet ? p.unet_module : p.text_module);
        k.role = role;
      }
  if (k.module.empty()) return std::nullopt;
  return k;
}

std::string underscored(std::string s) {
  std::ranges::replace(s, '.', '_');
  return s;
}

// transformers' CLIPTextModel is saved with "text_model." before its names or without (transformers 5).
std::string_view without_text_model(std::string_view module, bool underscore) {
  const std::string_view prefix = underscore ? "text_model_" : "text_model.";
  if (module.starts_with(prefix)) module.remove_prefix(prefix.size());
  return module;
}

// The modules of a model part that a LoRA can update (a weight of 2 or 4 dimensions), by every name a LoRA
// may give them: dotted, underscored (kohya), and for the U-Net the original layout's names too.
class ModuleIndex {
 public:
  ModuleIndex(const TensorSet& set, Component component) : component_(component) {
    std::vector<std::string> names;
    for (const TensorView& t : set.tensors()) names.push_back(t.name);
    const std::map<std::string, std::string> original =
        component == Component::UNet ? ldm_unet_names(names) : std::map<std::string, std::string>{};
    for (const TensorView& t : set.tensors()) {
      if (!t.name.ends_with(".weight") || (t.shape.size() != 2 && t.shape.size() != 4)) continue;
      const std::string module = t.name.substr(0, t.name.size() - 7);
      add(module, t.name);
      if (const auto it = original.find(t.name); it != original.end())
        add(it->second.substr(0, it->second.size() - 7), t.name);
    }
  }

  // The weight the module names, "" when there is none; Error when underscores make it ambiguous.
  std::string weight(const LoraKey& k, const std::string& label, const std::string& key) const {
    const std::string module = canonical(k.module, k.underscored);
    const auto& names = k.underscored ? underscored_ : dotted_;
    const auto it = names.find(module);
    if (it == names.end()) return "";
    if (it->second.empty())
      fail(label, ": key ", quote(key), ": the ", component_name(component_), " has several modules written ",
           quote(k.module), " with underscores");
    return it->second;
  }

 private:
  Component component_;
  std::map<std::string, std::string> dotted_, underscored_;  // module -> weight ("" when ambiguous)

  std::string canonical(std::string_view module, bool underscore) const {
    return std::string(component_ != Component::UNet ? without_text_model(module, underscore) : module);
  }
  void add(const std::string& module, const std::string& weight) {
    const std::string dotted = canonical(module, false);
    dotted_[dotted] = weight;
    const auto [it, fresh] = underscored_.emplace(underscored(dotted), weight);
    if (!fresh && it->second != weight) it->second = "";
  }
};

// diffusers' lora_adapter_metadata (PEFT's LoraConfig per model part, keys "unet.lora_alpha", ...): the alpha of
// modules without an alpha tensor.
struct AdapterConfig {
  std::optional<float> lora_alpha;
  std::map<std::string, float> alpha_pattern;  // module (or a dotted suffix of one) -> alpha
  bool use_rslora = false;
};

std::map<Component, AdapterConfig> adapter_configs(const SafeTensorsFile& file) {
  std::map<Component, AdapterConfig> out;
  const auto it = file.metadata().find("lora_adapter_metadata");
  if (it == file.metadata().end()) return out;
  const std::string label = file.label() + " metadata lora_adapter_metadata";
  const nlohmann::json root = parse_config_object(it->second, label);
  for (const auto& [key, value] : root.items()) {
    const size_t dot = key.find('.');
    const std::string part = key.substr(0, dot), field = dot == std::string::npos ? "" : key.substr(dot + 1);
    if (part != "unet" && part != "text_encoder" && part != "text_encoder_2") continue;  // another pipeline's part
    AdapterConfig& c = out[part == "unet"           ? Component::UNet
                           : part == "text_encoder" ? Component::TextEncoder
                                                    : Component::TextEncoder2];
    const auto number = [&](const nlohmann::json& v, const std::string& what) {
      if (!v.is_number() || !(std::abs(v.get<double>()) <= std::numeric_limits<float>::max()))
        fail(label, ": ", quote(what), ": expected a finite number, got ", describe_json(v));
      return float(v.get<double>());
    };
    if (field == "lora_alpha") {
      c.lora_alpha = number(value, key);
    } else if (field == "alpha_pattern") {
      if (!value.is_object()) fail(label, ": ", quote(key), ": expected an object, got ", describe_json(value));
      for (const auto& [module, alpha] : value.items()) c.alpha_pattern[module] = number(alpha, key + "." + module);
    } else if (field == "use_rslora" || field == "use_dora" || field == "lora_bias" || field == "fan_in_fan_out") {
      if (!value.is_boolean()) fail(label, ": ", quote(key), ": expected true or false, got ", describe_json(value));
      if (field == "use_rslora") c.use_rslora = value.get<bool>();
      else if (value.get<bool>()) fail(label, ": ", quote(key), " is true: rtvd merges plain LoRA updates only");
    }
  }
  return out;
}

// One module's update as the file gives it.
struct Update {
  Component component;
  std::string weight;  // the model's tensor
  const TensorView *down = nullptr, *up = nullptr, *alpha = nullptr;
  std::string first_key;  // names the update in errors
};

// A factor viewed with the weight's rank: a 1x1 conv and a linear layer hold the same matrix.
TensorView as_rank(const TensorView& f, size_t rank) {
  if (f.shape.size() == rank) return f;
  if (rank == 2 && f.shape.size() == 4 && f.shape[2] == 1 && f.shape[3] == 1) return reshaped(f, {f.shape[0], f.shape[1]});
  if (rank == 4 && f.shape.size() == 2) return reshaped(f, {f.shape[0], f.shape[1], 1, 1});
  return f;  // add_delta says why it does not fit
}

}  // namespace

LoraSpec parse_lora_spec(const std::string& value) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos || std::filesystem::exists(value)) {
    if (value.empty()) fail("--lora: expected FILE or FILE:SCALE, got an empty value");
    return {value, 1.0f};
  }
  LoraSpec spec{value.substr(0, colon), 1.0f};
  const std::string scale = value.substr(colon + 1);
  const auto r = std::from_chars(scale.data(), scale.data() + scale.size(), spec.scale);
  if (spec.path.empty() || scale.empty() || r.ec != std::errc() || r.ptr != scale.data() + scale.size() ||
      !std::isfinite(spec.scale))
    fail("--lora ", value, ": expected FILE or FILE:SCALE with SCALE a number, such as lcm.safetensors:0.8");
  return spec;
}

void apply_lora(const LoraSpec& spec, TensorSet& unet, TensorSet* text_encoder, TensorSet* text_encoder_2) {
  const std::shared_ptr<const SafeTensorsFile> file = open_checkpoint_file(spec.path, "LoRA");
  const std::string& label = file->label();
  // The model's parts by Component (nullptr: the model has none) and the modules a LoRA may name in each.
  const std::map<Component, TensorSet*> parts = {
      {Component::UNet, &unet}, {Component::TextEncoder, text_encoder}, {Component::TextEncoder2, text_encoder_2}};
  std::map<Component, ModuleIndex> modules;
  for (const auto& [component, set] : parts)
    if (set) modules.emplace(std::piecewise_construct, std::forward_as_tuple(component), std::forward_as_tuple(*set, component));
  const std::map<Component, AdapterConfig> configs = adapter_configs(*file);
  if (file->tensors().empty()) fail(label, ": holds no tensors, expected LoRA factors");

  std::map<std::pair<Component, std::string>, Update> updates;
  for (const TensorView& t : file->tensors()) {
    const std::optional<LoraKey> k = parse_key(t.name);
    if (!k)
      fail(label, ": key ", quote(t.name), ": not a LoRA factor rtvd knows (diffusers/PEFT: unet.<module>.lora_A.weight, "
           "lora_B, lora.down/up, alpha; kohya: lora_unet_<module>.lora_down.weight, lora_up, alpha; LyCORIS, DoRA "
           "and bias updates are not supported)");
    if (!parts.at(k->component))
      fail(label, ": key ", quote(t.name), ": an update of the ", component_name(k->component), ", but the model has none");
    const std::string weight = modules.at(k->component).weight(*k, label, t.name);
    if (weight.empty())
      fail(label, ": key ", quote(t.name), ": the ", component_name(k->component), " has no module ", quote(k->module));
    Update& u = updates[{k->component, weight}];
    if (u.first_key.empty()) u = Update{k->component, weight, nullptr, nullptr, nullptr, t.name};
    const TensorView*& slot = k->role == Role::Down ? u.down : k->role == Role::Up ? u.up : u.alpha;
    if (slot) fail(label, ": key ", quote(t.name), ": a second ", k->role == Role::Alpha ? "alpha" : "factor", " for ",
                   quote(weight), " (the first: ", quote(slot->name), ")");
    slot = &t;
  }

  // Checked whole before anything is attached, so that a failing file leaves the model as it was.
  std::vector<std::pair<Component, std::pair<std::string, LowRankDelta>>> deltas;
  for (const auto& [where, u] : updates) {
    if (!u.down || !u.up)
      fail(label, ": key ", quote(u.first_key), ": the update of ", quote(u.weight), " has no ", u.down ? "up" : "down",
           " factor");
    for (const TensorView* f : {u.down, u.up})
      if (f->numel() == 0)
        fail(label, ": key ", quote(f->name), ": shape ", shape_string(f->shape), " holds no values (an update of rank 0), "
             "expected factors of rank 1 or more");
    const TensorView& w = *parts.at(u.component)->find(u.weight);
    LowRankDelta d{as_rank(*u.up, w.shape.size()), as_rank(*u.down, w.shape.size()), 1.0f, label};
    const int64_t rank = d.down.shape.empty() ? 0 : d.down.shape[0];
    float alpha = float(rank);
    if (u.alpha) {
      const DType t = u.alpha->dtype;
      const bool is_float = t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16;
      if (u.alpha->numel() != 1 || !is_float || !std::isfinite(float_element(*u.alpha, 0)))
        fail(label, ": key ", quote(u.alpha->name), ": expected one finite number, got ", dtype_name(u.alpha->dtype), " ",
             shape_string(u.alpha->shape));
      alpha = float_element(*u.alpha, 0);
    } else if (const auto c = configs.find(u.component); c != configs.end()) {
      const std::string module = u.weight.substr(0, u.weight.size() - 7);
      alpha = c->second.lora_alpha.value_or(alpha);
      for (const auto& [pattern, a] : c->second.alpha_pattern)
        if (module == pattern || module.ends_with("." + pattern)) alpha = a;
    }
    const bool rslora = configs.contains(u.component) && configs.at(u.component).use_rslora;
    d.scale = rank > 0 ? spec.scale * alpha / (rslora ? std::sqrt(float(rank)) : float(rank)) : 0.0f;
    deltas.push_back({u.component, {u.weight, d}});
  }
  // add_delta checks the factors (shapes, dtypes, finite values); it runs on copies so that a failure on the
  // last update leaves the sets as they were.
  std::map<Component, TensorSet> copies;
  for (const auto& [component, set] : parts)
    if (set) copies.emplace(component, *set);
  for (auto& [component, named] : deltas) copies.at(component).add_delta(named.first, named.second, file);
  for (auto& [component, copy] : copies) *parts.at(component) = std::move(copy);
}

}  // namespace rtvd
