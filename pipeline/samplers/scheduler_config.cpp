// scheduler_config.json -> SchedulerConfig. The keys are those of the __init__ of each scheduler class rtvd
// accepts (diffusers writes every one of them, and configs keep keys of classes they were converted from:
// SD-Turbo's EulerDiscreteScheduler config carries PNDM's skip_prk_steps). Each is typed and checked; what a
// value means for a given sampler is make_sampler_plan's business (sampler_plan.cpp).
#include "pipeline/samplers/scheduler_config.h"

#include <array>
#include <cmath>
#include <string_view>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/config_reader.h"

namespace rtvd {

namespace {

using nlohmann::json;

constexpr int kMaxTrainTimesteps = 100000;

// In the order --sampler lists them.
constexpr SamplerKind kSamplers[] = {SamplerKind::Euler, SamplerKind::EulerAncestral, SamplerKind::Lcm,
                                     SamplerKind::Ddim};

struct SchedulerClass {
  const char* name;
  SamplerKind native;  // see SchedulerConfig::native_sampler
};
constexpr SchedulerClass kClasses[] = {
    {"EulerDiscreteScheduler", SamplerKind::Euler},
    {"EulerAncestralDiscreteScheduler", SamplerKind::EulerAncestral},
    {"LMSDiscreteScheduler", SamplerKind::Euler},
    {"HeunDiscreteScheduler", SamplerKind::Euler},
    {"KDPM2DiscreteScheduler", SamplerKind::Euler},
    {"KDPM2AncestralDiscreteScheduler", SamplerKind::Euler},
    {"LCMScheduler", SamplerKind::Lcm},
    {"DDIMScheduler", SamplerKind::Ddim},
    {"PNDMScheduler", SamplerKind::Ddim},
    {"DDPMScheduler", SamplerKind::Ddim},
    {"DPMSolverMultistepScheduler", SamplerKind::Ddim},
    {"DPMSolverSinglestepScheduler", SamplerKind::Ddim},
    {"DEISMultistepScheduler", SamplerKind::Ddim},
    {"UniPCMultistepScheduler", SamplerKind::Ddim},
};

const SchedulerClass* find_class(const std::string& name) {
  for (const SchedulerClass& c : kClasses)
    if (name == c.name) return &c;
  return nullptr;
}

// Read into SchedulerConfig below.
constexpr std::array<std::string_view, 20> kReadKeys = {
    "num_train_timesteps", "beta_start",        "beta_end",        "beta_schedule",          "trained_betas",
    "prediction_type",     "timestep_spacing",  "steps_offset",    "set_alpha_to_one",       "original_inference_steps",
    "timestep_scaling",    "clip_sample",       "thresholding",    "rescale_betas_zero_snr", "use_karras_sigmas",
    "use_exponential_sigmas", "use_beta_sigmas", "interpolation_type", "final_sigmas_type",  "timestep_type",
};
// Read only by variants that are refused (thresholding, Karras-style sigmas) or that the SD pipelines turn off
// (clipping): checked for type only.
constexpr std::array<std::string_view, 5> kVariantParameterKeys = {
    "clip_sample_range", "dynamic_thresholding_ratio", "sample_max_value", "sigma_min", "sigma_max"};
// Read only by the other classes (PNDM, DDPM, DPM-Solver, DEIS, UniPC), or by diffusers 0.2 and 0.3 (tensor_format,
// which later versions ignore): nothing rtvd computes depends on them.
constexpr std::array<std::string_view, 18> kOtherClassKeys = {
    "skip_prk_steps",     "variance_type",        "solver_order",    "algorithm_type", "solver_type",
    "lower_order_final",  "euler_at_final",       "use_lu_lambdas",  "use_flow_sigmas", "flow_shift",
    "lambda_min_clipped", "use_dynamic_shifting", "time_shift_type", "predict_x0",     "disable_corrector",
    "solver_p",           "shift_terminal",       "tensor_format"};
constexpr std::array<std::string_view, 4> kMetadataKeys = {"_class_name", "_diffusers_version", "_name_or_path",
                                                           "_use_default_values"};

const std::vector<std::string_view>& known_keys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k(kReadKeys.begin(), kReadKeys.end());
    k.insert(k.end(), kVariantParameterKeys.begin(), kVariantParameterKeys.end());
    k.insert(k.end(), kOtherClassKeys.begin(), kOtherClassKeys.end());
    return k;
  }();
  return keys;
}

// Python's json writes float("inf") as -Infinity / Infinity (and NaN), which JSON lacks, and diffusers saves
// DPMSolverMultistepScheduler's lambda_min_clipped = -inf so. Those tokens, outside strings, become null:
// harmless for the keys nothing here reads, and a type error naming the key for one that is read.
std::string python_floats_as_null(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (std::string_view token : {"-Infinity", "Infinity", "NaN"})
      if (text.substr(i, token.size()) == token) {
        out += "null";
        i += token.size() - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += c;
  }
  return out;
}

// A number, kept in double as Python keeps it, that in_range accepts.
template <class InRange>
void read_number(const ConfigReader& r, const json& root, const char* key, InRange in_range, const char* expected,
                 std::optional<double>& out) {
  if (!r.has(key)) return;
  const json& v = root[key];
  if (!v.is_number() || !in_range(v.get<double>())) r.fail_key(key, expected, describe_json(v));
  out = v.get<double>();
}

bool is_beta(double b) { return b >= 0 && b < 1; }

// A key only a refused variant reads: a number, or null where diffusers' default is None.
void check_number_or_null(const ConfigReader& r, const json& root, const char* key, bool null_allowed) {
  if (!r.has(key)) return;
  const json& v = root[key];
  if (v.is_number() || (null_allowed && v.is_null())) return;
  r.fail_key(key, null_allowed ? "a number or null" : "a number", describe_json(v));
}

std::string choice_string(const ConfigReader& r, const char* key, std::initializer_list<std::string_view> options,
                          const std::string& fallback) {
  if (!r.has(key)) return fallback;
  return std::string(*(options.begin() + r.choice(key, options)));
}

}  // namespace

const char* sampler_name(SamplerKind k) {
  switch (k) {
    case SamplerKind::Euler: return "euler";
    case SamplerKind::EulerAncestral: return "euler_a";
    case SamplerKind::Lcm: return "lcm";
    case SamplerKind::Ddim: return "ddim";
  }
  return "?";
}

std::vector<std::string> sampler_names() {
  std::vector<std::string> names;
  for (SamplerKind k : kSamplers) names.push_back(sampler_name(k));
  return names;
}

SamplerKind sampler_named(const std::string& name) {
  for (SamplerKind k : kSamplers)
    if (name == sampler_name(k)) return k;
  fail("--sampler ", printable(name), ": expected euler, euler_a, lcm or ddim");
}

const char* prediction_type_name(PredictionType p) {
  return p == PredictionType::Epsilon ? "epsilon" : "v_prediction";
}

std::vector<std::string> prediction_type_names() {
  return {prediction_type_name(PredictionType::Epsilon), prediction_type_name(PredictionType::VPrediction)};
}

PredictionType prediction_type_named(const std::string& name) {
  for (PredictionType p : {PredictionType::Epsilon, PredictionType::VPrediction})
    if (name == prediction_type_name(p)) return p;
  fail("prediction type ", quote(name), ": expected epsilon or v_prediction");
}

const char* timestep_spacing_name(TimestepSpacing s) {
  switch (s) {
    case TimestepSpacing::Leading: return "leading";
    case TimestepSpacing::Trailing: return "trailing";
    case TimestepSpacing::Linspace: return "linspace";
  }
  return "?";
}

std::vector<std::string> timestep_spacing_names() {
  return {timestep_spacing_name(TimestepSpacing::Leading), timestep_spacing_name(TimestepSpacing::Trailing),
          timestep_spacing_name(TimestepSpacing::Linspace)};
}

TimestepSpacing timestep_spacing_named(const std::string& name) {
  for (TimestepSpacing s : {TimestepSpacing::Leading, TimestepSpacing::Trailing, TimestepSpacing::Linspace})
    if (name == timestep_spacing_name(s)) return s;
  fail("timestep spacing ", quote(name), ": expected leading, trailing or linspace");
}

SamplerKind SchedulerConfig::native_sampler() const {
  const SchedulerClass* c = find_class(class_name);
  if (!c) fail(label, ": key '_class_name': ", quote(class_name), " is not a scheduler class rtvd knows");
  return c->native;
}

SchedulerConfig parse_scheduler_config(const std::string& json_text, const std::string& label) {
  const json file = parse_config_object(python_floats_as_null(json_text), label);
  const ConfigReader file_reader(file, label);
  SchedulerConfig c;
  c.label = label;
  c.class_name = file_reader.string("_class_name");
  if (!find_class(c.class_name)) {
    std::string classes;
    for (const SchedulerClass& k : kClasses) classes += cat(classes.empty() ? "" : ", ", k.name);
    file_reader.fail_key("_class_name", cat("one of ", classes), describe_json(file["_class_name"]));
  }
  file_reader.reject_unknown_keys(known_keys(), kMetadataKeys);

  // diffusers' from_config drops the keys a config lists in _use_default_values: they take the default of
  // the class being made, whatever value was saved beside them.
  json root = file;
  std::vector<std::string> defaulted;
  file_reader.optional_string_array("_use_default_values", defaulted);
  for (const std::string& key : defaulted) root.erase(key);
  const ConfigReader r(root, label);

  r.optional_integer("num_train_timesteps", 1, kMaxTrainTimesteps, c.num_train_timesteps);
  read_number(r, root, "beta_start", is_beta, "a number in [0, 1)", c.beta_start);
  read_number(r, root, "beta_end", is_beta, "a number in [0, 1)", c.beta_end);
  if (r.has("beta_schedule"))
    c.beta_schedule = r.choice("beta_schedule", {"linear", "scaled_linear"}) == 0 ? BetaSchedule::Linear
                                                                                  : BetaSchedule::ScaledLinear;
  if (!r.is_null("trained_betas"))
    r.fail_key("trained_betas", "null (rtvd computes the betas from beta_schedule)",
               describe_json(root["trained_betas"]));
  if (r.has("prediction_type"))
    c.prediction = r.choice("prediction_type", {"epsilon", "v_prediction"}) == 0 ? PredictionType::Epsilon
                                                                                  : PredictionType::VPrediction;
  if (r.has("timestep_spacing"))
    c.timestep_spacing = std::array{TimestepSpacing::Leading, TimestepSpacing::Trailing, TimestepSpacing::Linspace}
        [r.choice("timestep_spacing", {"leading", "trailing", "linspace"})];
  r.optional_bool("set_alpha_to_one", c.set_alpha_to_one);
  r.optional_integer("original_inference_steps", 1, kMaxTrainTimesteps, c.original_inference_steps);
  std::optional<double> scaling;
  read_number(r, root, "timestep_scaling", [](double s) { return s > 0 && std::isfinite(s); },
              "a positive number", scaling);
  c.timestep_scaling = scaling.value_or(c.timestep_scaling);

  bool rescale = false;
  r.optional_bool("rescale_betas_zero_snr", rescale);
  if (rescale)
    r.fail_key("rescale_betas_zero_snr", "false (rtvd does not rescale the betas to zero terminal SNR)", "true");
  r.optional_bool("thresholding", c.thresholding);
  r.optional_bool("use_karras_sigmas", c.use_karras_sigmas);
  r.optional_bool("use_exponential_sigmas", c.use_exponential_sigmas);
  r.optional_bool("use_beta_sigmas", c.use_beta_sigmas);
  c.interpolation_type = choice_string(r, "interpolation_type", {"linear", "log_linear"}, c.interpolation_type);
  c.final_sigmas_type = choice_string(r, "final_sigmas_type", {"zero", "sigma_min"}, c.final_sigmas_type);
  c.timestep_type = choice_string(r, "timestep_type", {"discrete", "continuous"}, c.timestep_type);
  // Set to 1 and false by the SD pipelines whatever they are (scheduler_config.h).
  int ignored_offset = 0;
  r.optional_integer("steps_offset", 0, kMaxTrainTimesteps, ignored_offset);
  bool ignored_clip = false;
  r.optional_bool("clip_sample", ignored_clip);
  for (const char* key : {"clip_sample_range", "dynamic_thresholding_ratio", "sample_max_value"})
    check_number_or_null(r, root, key, false);
  for (const char* key : {"sigma_min", "sigma_max"}) check_number_or_null(r, root, key, true);
  return c;
}

SchedulerConfig load_scheduler_config(const std::string& path) {
  return parse_scheduler_config(read_config_file(path), path);
}

SchedulerConfig default_scheduler_config(PredictionType prediction) {
  SchedulerConfig c;
  c.label = "SD's default scheduler config (the checkpoint has none)";
  c.assumed = true;
  c.class_name = "PNDMScheduler";
  c.num_train_timesteps = 1000;
  c.beta_start = 0.00085;
  c.beta_end = 0.012;
  c.beta_schedule = BetaSchedule::ScaledLinear;
  c.prediction = prediction;
  c.timestep_spacing = TimestepSpacing::Leading;
  c.set_alpha_to_one = false;
  return c;
}

}  // namespace rtvd
