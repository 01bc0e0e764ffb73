// The samplers (pipeline/samplers/) against diffusers' own step traces, and the scheduler configs they read.
// tests/data/sd_refs/schedulers.json is written by tools/reference/export_sd_references.py on the GPU machine:
// for EulerDiscreteScheduler, LCMScheduler and DDIMScheduler under each spacing, prediction type, step count and
// strength (1 and 0.5), diffusers' timesteps, start sample, and per step the U-Net input (scale_model_input), a
// random model output, the injected noise (LCM) and prev_sample (copied unchanged from the export's output);
// tests/data/sd_refs/euler_ancestral.json, by tools/reference/export_euler_ancestral.py, the same for
// EulerAncestralDiscreteScheduler, with the noise each of its steps drew.
// Each case's plan must give the same timesteps, and its coefficients applied to the trace's own inputs must give
// the trace's outputs; a case where img2img keeps no step (1 step at strength 0.5) must be refused.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "base/error.h"
#include "pipeline/samplers/flow_sampler.h"
#include "pipeline/samplers/sampler_plan.h"
#include "pipeline/samplers/scheduler_config.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;
using test::error_of;
using testing::IsSubstring;

constexpr SamplerKind kSdSamplers[] = {SamplerKind::Euler, SamplerKind::EulerAncestral, SamplerKind::Lcm,
                                       SamplerKind::Ddim};

// Relative L2 allowed between a plan's step and diffusers'. Both sides are fp32 arithmetic over fp32 inputs;
// rtvd's coefficients come from a double-precision schedule rounded once to fp32, diffusers' from fp32 tensors
// (alphas_cumprod, sigmas) and several fp32 operations per step, so each side is within a few ulps (~1e-7
// relative) of the exact step, more where terms partly cancel: the traces differ by under 1e-6 (but below).
// 1e-5 leaves a margin, and a wrong coefficient (the sigma of a neighbouring timestep is 0.1% to 10% off) is
// far beyond it.
constexpr double kStepTolerance = 1e-5;

// Where diffusers' own schedule is further off: its Euler sigma = sqrt((1 - a) / a) from an fp32
// a = alphas_cumprod[t] loses 2^-24 / (1 - a) of 1 - a, which is 0.00085 at t = 0, so up to
// 2^-25 / sigma^2 = 3.5e-5 of sigma there (1.28e-5 in the traces, where "linspace" at one step runs t = 0;
// rtvd's sigma, from a double schedule, is the exact one). An Euler case's tolerance adds that for its
// smallest sigma; it is under 1e-7 for sigma above 0.6.
double euler_allowance(const json& sigmas) {
  double smallest = HUGE_VAL;
  for (double s : sigmas.get<std::vector<double>>())
    if (s > 0) smallest = std::min(smallest, s);
  return std::ldexp(1.0, -25) / (smallest * smallest);
}

std::vector<float> floats(const json& v) { return v.get<std::vector<float>>(); }

// a * x + b * y + c * z, in fp32 as the engine's step op computes it; z may be empty when c is 0.
std::vector<float> combine(float a, const std::vector<float>& x, float b, const std::vector<float>& y, float c = 0,
                           const std::vector<float>& z = {}) {
  std::vector<float> out = test::poisoned(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = a * x[i] + b * y[i] + (z.empty() ? 0.0f : c * z[i]);
  return out;
}

// A trace file of tests/data; its writer (a script of tools/reference/) named when it is missing.
json read_traces(const std::string& name, const char* writer) {
  const std::string path = test::test_data(name);
  std::ifstream f(path);
  if (!f) fail(path, ": cannot open (written by ", writer, " on the GPU machine, PYTHONPATH=<diffusers>/src)");
  return json::parse(f);
}

const char* class_of(const std::string& sampler) {
  return sampler == "euler"     ? "EulerDiscreteScheduler"
         : sampler == "euler_a" ? "EulerAncestralDiscreteScheduler"
         : sampler == "lcm"     ? "LCMScheduler"
                                : "DDIMScheduler";
}

// The config diffusers ran the case with, as the scheduler_config.json it would save (the export drops the
// "_" keys): so every key diffusers writes for these classes goes through the parser too.
SchedulerConfig case_config(const json& c, const std::string& label) {
  json config = c["config"];
  config["_class_name"] = class_of(c["sampler"].get<std::string>());
  return parse_scheduler_config(config.dump(), label);
}

struct Worst {
  double start = 0, input = 0, step = 0, chained = 0;
};

// One case of a trace file: the plan's timesteps, its start applied to the case's noise (and image latent), and
// each step's input scale and update applied to diffusers' own sample, model output and noise must give
// diffusers' numbers, and so must the whole chain of steps from rtvd's start. Returns false for a case whose
// img2img keeps no step (diffusers runs none), which must be refused naming --strength.
bool check_trace_case(const json& c, Worst& w) {
  const std::string sampler = c["sampler"];
  const float strength = c["strength"].get<float>();
  const int steps = c["steps"].get<int>();
  const SchedulerConfig cfg = case_config(c, "the case's config");
  const std::vector<double> timesteps = c["timesteps"].get<std::vector<double>>();
  if (timesteps.empty()) {
    EXPECT_PRED_FORMAT2(IsSubstring, "--strength",
                        error_of([&] { make_sampler_plan(cfg, sampler_named(sampler), steps, strength); }));
    return false;
  }
  const SamplerPlan plan = make_sampler_plan(cfg, sampler_named(sampler), steps, strength);
  const bool euler_family = sampler == "euler" || sampler == "euler_a";
  const double tolerance = kStepTolerance + (euler_family ? euler_allowance(c["sigmas"]) : 0.0);

  EXPECT_EQ(plan.steps.size(), timesteps.size());
  if (plan.steps.size() != timesteps.size()) return true;
  for (size_t i = 0; i < timesteps.size(); ++i) EXPECT_EQ(plan.steps[i].timestep, timesteps[i]) << "step " << i;

  const std::vector<float> noise = floats(c["noise"]), start = floats(c["start"]);
  const std::vector<float> latent = strength < 1 ? floats(c["image_latent"]) : std::vector<float>(noise.size(), 0.0f);
  if (strength == 1) EXPECT_EQ(plan.start_latent_coef, 0.0f);
  const double e_start = test::rel_l2(combine(plan.start_latent_coef, latent, plan.start_noise_coef, noise), start);
  EXPECT_LE(e_start, tolerance);
  w.start = std::max(w.start, e_start);

  const json& trace = c["steps_trace"];
  EXPECT_EQ(trace.size(), plan.steps.size());
  if (trace.size() != plan.steps.size()) return true;
  std::vector<float> x = start, chained = start;
  for (size_t i = 0; i < trace.size(); ++i) {
    SCOPED_TRACE(cat("step ", i, " t ", timesteps[i]));
    const SamplerStep& p = plan.steps[i];
    const json& t = trace[i];
    const std::vector<float> out = floats(t["model_output"]), prev = floats(t["prev_sample"]);
    const bool injects = t.contains("injected_noise");
    // Euler ancestral draws noise at every step, and at the last one (sigma' = 0) scales it by sigma_up = 0.
    const bool adds = injects && !(sampler == "euler_a" && i + 1 == trace.size());
    EXPECT_EQ(adds, p.noise_coef != 0.0f);
    const std::vector<float> fresh = injects ? floats(t["injected_noise"]) : std::vector<float>{};
    const double e_in = test::rel_l2(combine(p.input_scale, x, 0.0f, x), floats(t["model_input"]));
    const double e_step = test::rel_l2(combine(p.x_coef, x, p.out_coef, out, p.noise_coef, fresh), prev);
    EXPECT_LE(e_in, tolerance);
    EXPECT_LE(e_step, tolerance);
    w.input = std::max(w.input, e_in);
    w.step = std::max(w.step, e_step);
    // The whole run from the start, as the engine makes it: rtvd's own samples, diffusers' outputs and noise.
    chained = combine(p.x_coef, chained, p.out_coef, out, p.noise_coef, fresh);
    x = prev;
  }
  const double e_chain = test::rel_l2(chained, x);
  EXPECT_LE(e_chain, tolerance);
  w.chained = std::max(w.chained, e_chain);
  return true;
}

std::string case_name(const json& c) {
  return cat(c["sampler"].get<std::string>(), " ", c["timestep_spacing"].get<std::string>(), " ",
             c["prediction_type"].get<std::string>(), " steps ", c["steps"].get<int>(), " strength ",
             c["strength"].get<double>());
}

void record_worst(const std::map<std::string, Worst>& worst) {
  for (const auto& [sampler, w] : worst)
    testing::Test::RecordProperty(cat("worst_rel_l2_", sampler),
                                  cat("start ", w.start, " input ", w.input, " step ", w.step, " chained ", w.chained));
}

TEST(SamplerTraces, EveryDiffusersCaseGivesItsTimestepsAndSteps) {
  const json cases = read_traces("sd_refs/schedulers.json", "tools/reference/export_sd_references.py")["cases"];
  ASSERT_FALSE(cases.empty());
  std::map<std::string, Worst> worst;                            // by sampler
  std::set<std::tuple<std::string, std::string, bool>> covered;  // sampler, prediction, img2img
  int refused = 0;                                               // cases that leave no step
  for (const json& c : cases) {
    SCOPED_TRACE(case_name(c));
    const std::string sampler = c["sampler"];
    if (check_trace_case(c, worst[sampler]))
      covered.insert({sampler, c["prediction_type"].get<std::string>(), c["strength"] < 1});
    else
      ++refused;
  }
  for (const char* sampler : {"euler", "lcm", "ddim"})
    for (const char* prediction : {"epsilon", "v_prediction"})
      for (bool img2img : {false, true})
        EXPECT_TRUE(covered.count({sampler, prediction, img2img}))
            << "no case of " << sampler << " " << prediction << (img2img ? " img2img" : " txt2img");
  RecordProperty("cases", int(cases.size()));
  RecordProperty("cases_without_steps", refused);
  record_worst(worst);
}

// tests/data/sd_refs/euler_ancestral.json, written by tools/reference/export_euler_ancestral.py: diffusers'
// EulerAncestralDiscreteScheduler under each spacing and prediction type, at 1, 2 and 4 steps, txt2img and
// img2img, with the noise its steps drew. Every spacing, prediction type and mode must be there, and some
// step must add noise (a file of 1-step cases alone would test Euler's step only).
TEST(SamplerTraces, EulerAncestralGivesDiffusersSteps) {
  const json cases = read_traces("sd_refs/euler_ancestral.json", "tools/reference/export_euler_ancestral.py")["cases"];
  ASSERT_FALSE(cases.empty());
  std::map<std::string, Worst> worst;
  std::set<std::tuple<std::string, std::string, bool>> covered;  // spacing, prediction, img2img
  int noisy_steps = 0;
  for (const json& c : cases) {
    SCOPED_TRACE(case_name(c));
    ASSERT_EQ(c["sampler"], "euler_a");
    if (!check_trace_case(c, worst["euler_a"])) continue;
    covered.insert(
        {c["timestep_spacing"].get<std::string>(), c["prediction_type"].get<std::string>(), c["strength"] < 1});
    noisy_steps += int(c["steps_trace"].size()) - 1;
  }
  for (const char* spacing : {"leading", "trailing", "linspace"})
    for (const char* prediction : {"epsilon", "v_prediction"})
      for (bool img2img : {false, true})
        EXPECT_TRUE(covered.count({spacing, prediction, img2img}))
            << "no case of " << spacing << " " << prediction << (img2img ? " img2img" : " txt2img");
  EXPECT_GT(noisy_steps, 0);
  RecordProperty("cases", int(cases.size()));
  RecordProperty("noisy_steps", noisy_steps);
  record_worst(worst);
}

// ------------------------------------------------------------------------------------------------ configs

// An error message: one line, naming the config's label and the key.
void expect_config_error(const std::string& message, const std::string& label, const std::string& key) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_PRED_FORMAT2(IsSubstring, label, message);
  EXPECT_PRED_FORMAT2(IsSubstring, "'" + key + "'", message);
}

void parse_error(const std::string& text, const std::string& key) {
  const std::string label = "scheduler/scheduler_config.json";
  expect_config_error(error_of([&] { parse_scheduler_config(text, label); }), label, key);
}

// The config parses, and a 4-step plan of the sampler is refused.
void plan_error(const std::string& text, SamplerKind kind, const std::string& key) {
  const std::string label = "scheduler/scheduler_config.json";
  const SchedulerConfig cfg = parse_scheduler_config(text, label);
  expect_config_error(error_of([&] { make_sampler_plan(cfg, kind, 4, 1.0f); }), label, key);
}

json base_config(const char* class_name) {
  return {{"_class_name", class_name}, {"beta_schedule", "scaled_linear"},
          {"beta_start", 0.00085},     {"beta_end", 0.012},
          {"clip_sample", false},      {"set_alpha_to_one", false},
          {"steps_offset", 1},         {"num_train_timesteps", 1000}};
}

json with(json j, const char* key, json value) {
  j[key] = std::move(value);
  return j;
}

void expect_same_plan(const SamplerPlan& a, const SamplerPlan& b) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].timestep, b.steps[i].timestep);
    EXPECT_EQ(a.steps[i].input_scale, b.steps[i].input_scale);
    EXPECT_EQ(a.steps[i].x_coef, b.steps[i].x_coef);
    EXPECT_EQ(a.steps[i].out_coef, b.steps[i].out_coef);
    EXPECT_EQ(a.steps[i].noise_coef, b.steps[i].noise_coef);
  }
  EXPECT_EQ(a.start_latent_coef, b.start_latent_coef);
  EXPECT_EQ(a.start_noise_coef, b.start_noise_coef);
}

SamplerPlan plan_of(const json& config, SamplerKind kind, int steps, float strength = 1.0f) {
  return make_sampler_plan(parse_scheduler_config(config.dump(), "config"), kind, steps, strength);
}

// tests/data/tiny_sd's config, as diffusers' save_pretrained wrote it: SD-Turbo's schedule (Euler, "trailing").
TEST(SchedulerConfig, TinySdConfigLoads) {
  const std::string path = test::test_data("tiny_sd/scheduler/scheduler_config.json");
  const SchedulerConfig cfg = load_scheduler_config(path);
  EXPECT_EQ(cfg.class_name, "EulerDiscreteScheduler");
  EXPECT_EQ(cfg.native_sampler(), SamplerKind::Euler);
  EXPECT_EQ(cfg.sampler_for(std::nullopt), SamplerKind::Euler) << "no --sampler: the scheduler's own";
  EXPECT_EQ(cfg.sampler_for(SamplerKind::Lcm), SamplerKind::Lcm) << "--sampler wins";
  EXPECT_EQ(cfg.prediction, PredictionType::Epsilon);
  EXPECT_EQ(cfg.timestep_spacing, TimestepSpacing::Trailing);
  EXPECT_EQ(cfg.beta_schedule, BetaSchedule::ScaledLinear);
  // "trailing" starts every schedule at the last training timestep, the one SD-Turbo's single step needs.
  for (int steps : {1, 2, 4}) {
    const SamplerPlan plan = make_sampler_plan(cfg, SamplerKind::Euler, steps, 1.0f);
    ASSERT_EQ(int(plan.steps.size()), steps);
    EXPECT_EQ(plan.steps[0].timestep, cfg.num_train_timesteps - 1);
  }
  EXPECT_EQ(make_sampler_plan(cfg, SamplerKind::Lcm, 4, 1.0f).steps.size(), 4u);
  // The file has no clip_sample: DDIMScheduler.from_config would clip (its default), but the SD pipelines
  // turn clipping off, as diffusers' run of this folder with DDIM did (export_sd_references.py, pipelines).
  EXPECT_EQ(make_sampler_plan(cfg, SamplerKind::Ddim, 4, 1.0f).steps.size(), 4u);
}

// StableDiffusionPipeline and StableDiffusionImg2ImgPipeline set steps_offset to 1 and clip_sample to false,
// whatever the config says.
TEST(SchedulerConfig, PipelinesSetStepsOffsetAndClipSample) {
  const json base = base_config("DDIMScheduler");
  for (SamplerKind k : kSdSamplers) {
    SCOPED_TRACE(sampler_name(k));
    json bare = base;
    bare.erase("steps_offset");
    bare.erase("clip_sample");
    for (const json& variant :
         {bare, with(base, "steps_offset", 0), with(base, "steps_offset", 7), with(base, "clip_sample", true)})
      expect_same_plan(plan_of(variant, k, 4, 0.75f), plan_of(base, k, 4, 0.75f));
  }
}

TEST(SchedulerConfig, MissingKeysTakeTheDefaultsOfTheSamplersClass) {
  // SD 1.5's scheduler_config.json as diffusers' documentation prints it: a PNDMScheduler without
  // timestep_spacing, which EulerDiscreteScheduler reads as "linspace" and DDIMScheduler as "leading".
  const json sd15 = R"({"_class_name": "PNDMScheduler", "_diffusers_version": "0.8.0.dev0", "beta_end": 0.012,
    "beta_schedule": "scaled_linear", "beta_start": 0.00085, "clip_sample": false, "num_train_timesteps": 1000,
    "set_alpha_to_one": false, "skip_prk_steps": true, "steps_offset": 1, "trained_betas": null})"_json;
  EXPECT_EQ(parse_scheduler_config(sd15.dump(), "sd15").native_sampler(), SamplerKind::Ddim);
  expect_same_plan(plan_of(sd15, SamplerKind::Euler, 4),
                   plan_of(with(sd15, "timestep_spacing", "linspace"), SamplerKind::Euler, 4));
  expect_same_plan(plan_of(sd15, SamplerKind::EulerAncestral, 4),
                   plan_of(with(sd15, "timestep_spacing", "linspace"), SamplerKind::EulerAncestral, 4));
  expect_same_plan(plan_of(sd15, SamplerKind::Ddim, 4),
                   plan_of(with(sd15, "timestep_spacing", "leading"), SamplerKind::Ddim, 4));
  // Betas: Euler's and DDIM's defaults are linear 0.0001 to 0.02, LCM's SD's own.
  json bare = {{"_class_name", "LCMScheduler"}};
  expect_same_plan(
      plan_of(bare, SamplerKind::Lcm, 4),
      plan_of(with(with(with(bare, "beta_schedule", "scaled_linear"), "beta_start", 0.00085), "beta_end", 0.012),
              SamplerKind::Lcm, 4));
  expect_same_plan(plan_of(bare, SamplerKind::Ddim, 4),
                   plan_of(with(with(with(bare, "beta_schedule", "linear"), "beta_start", 0.0001), "beta_end", 0.02),
                           SamplerKind::Ddim, 4));
  // LCM does not read the spacing.
  expect_same_plan(plan_of(with(sd15, "timestep_spacing", "trailing"), SamplerKind::Lcm, 4),
                   plan_of(sd15, SamplerKind::Lcm, 4));
}

// DDIM's last step goes past t = 0, to alphas_cumprod 1 or alphas_cumprod[0]; LCM never steps past its timesteps.
TEST(SchedulerConfig, SetAlphaToOneMovesOnlyDdimsLastStep) {
  const json config = base_config("DDIMScheduler");  // set_alpha_to_one false
  const SamplerPlan ddim = plan_of(config, SamplerKind::Ddim, 4),
                    ddim_one = plan_of(with(config, "set_alpha_to_one", true), SamplerKind::Ddim, 4);
  for (size_t i = 0; i + 1 < ddim.steps.size(); ++i) EXPECT_EQ(ddim.steps[i].x_coef, ddim_one.steps[i].x_coef);
  EXPECT_NE(ddim.steps.back().x_coef, ddim_one.steps.back().x_coef);
  expect_same_plan(plan_of(config, SamplerKind::Lcm, 4),
                   plan_of(with(config, "set_alpha_to_one", true), SamplerKind::Lcm, 4));
}

TEST(SchedulerConfig, UseDefaultValuesCountAsMissing) {
  const json turbo = with(base_config("EulerDiscreteScheduler"), "timestep_spacing", "trailing");
  const json defaulted = with(turbo, "_use_default_values", {"timestep_spacing"});
  expect_same_plan(plan_of(defaulted, SamplerKind::Euler, 2),
                   plan_of(with(turbo, "timestep_spacing", "linspace"), SamplerKind::Euler, 2));
}

TEST(SchedulerConfig, DefaultConfigIsSdsSchedule) {
  for (PredictionType p : {PredictionType::Epsilon, PredictionType::VPrediction}) {
    const SchedulerConfig cfg = default_scheduler_config(p);
    EXPECT_EQ(cfg.prediction, p);
    EXPECT_EQ(cfg.native_sampler(), SamplerKind::Ddim);
    const json same = with(with(base_config("PNDMScheduler"), "timestep_spacing", "leading"), "prediction_type",
                           prediction_type_name(p));
    for (SamplerKind k : kSdSamplers)
      expect_same_plan(make_sampler_plan(cfg, k, 4, 1.0f), plan_of(same, k, 4));
  }
}

TEST(SchedulerConfig, NativeSamplers) {
  const std::pair<const char*, SamplerKind> expected[] = {
      {"EulerDiscreteScheduler", SamplerKind::Euler}, {"EulerAncestralDiscreteScheduler", SamplerKind::EulerAncestral},
      {"LMSDiscreteScheduler", SamplerKind::Euler},   {"LCMScheduler", SamplerKind::Lcm},
      {"DDIMScheduler", SamplerKind::Ddim},           {"PNDMScheduler", SamplerKind::Ddim},
      {"DDPMScheduler", SamplerKind::Ddim},           {"DPMSolverMultistepScheduler", SamplerKind::Ddim}};
  for (const auto& [name, kind] : expected)
    EXPECT_EQ(parse_scheduler_config(base_config(name).dump(), name).native_sampler(), kind) << name;
}

// diffusers saves DPMSolverMultistepScheduler's lambda_min_clipped = -inf as Python's json writes it.
TEST(SchedulerConfig, PythonInfinityIsAccepted) {
  const std::string dpm = R"({"_class_name": "DPMSolverMultistepScheduler", "algorithm_type": "dpmsolver++",
    "beta_schedule": "scaled_linear", "lambda_min_clipped": -Infinity, "solver_order": 2,
    "use_karras_sigmas": true, "_diffusers_version": "0.29.0"})";
  const SchedulerConfig cfg = parse_scheduler_config(dpm, "dpm");
  EXPECT_EQ(cfg.native_sampler(), SamplerKind::Ddim);
  // Karras sigmas are DPM-Solver's here; of rtvd's samplers only Euler's class reads them.
  EXPECT_NO_THROW(make_sampler_plan(cfg, SamplerKind::Lcm, 4, 1.0f));
  plan_error(dpm, SamplerKind::Euler, "use_karras_sigmas");
  // Inside a string the token is text, and a read key holding one is refused by name.
  parse_error(R"({"_class_name": "DDIMScheduler", "prediction_type": "NaN"})", "prediction_type");
  parse_error(R"({"_class_name": "DDIMScheduler", "beta_end": Infinity})", "beta_end");
}

TEST(SchedulerConfig, ParseErrorsNameTheKey) {
  const json base = base_config("EulerDiscreteScheduler");
  parse_error(with(base, "beta_strat", 0.001).dump(), "beta_strat");
  parse_error(with(base, "_class_name", "FlowMatchEulerDiscreteScheduler").dump(), "_class_name");
  parse_error(R"({"beta_end": 0.012})", "_class_name");
  parse_error(with(base, "trained_betas", {0.1, 0.2}).dump(), "trained_betas");
  parse_error(with(base, "rescale_betas_zero_snr", true).dump(), "rescale_betas_zero_snr");
  parse_error(with(base, "beta_schedule", "squaredcos_cap_v2").dump(), "beta_schedule");
  parse_error(with(base, "prediction_type", "sample").dump(), "prediction_type");
  parse_error(with(base, "timestep_spacing", "uniform").dump(), "timestep_spacing");
  parse_error(with(base, "num_train_timesteps", 0).dump(), "num_train_timesteps");
  parse_error(with(base, "beta_start", -0.1).dump(), "beta_start");
  parse_error(with(base, "beta_end", 1.0).dump(), "beta_end");
  parse_error(with(base, "steps_offset", "1").dump(), "steps_offset");
  parse_error(with(base, "clip_sample", "no").dump(), "clip_sample");
  parse_error(with(base, "set_alpha_to_one", 1).dump(), "set_alpha_to_one");
  parse_error(with(base, "timestep_scaling", 0).dump(), "timestep_scaling");
  parse_error(with(base, "original_inference_steps", 0).dump(), "original_inference_steps");
  parse_error(with(base, "interpolation_type", "cubic").dump(), "interpolation_type");
  parse_error(with(base, "sigma_min", "small").dump(), "sigma_min");
  parse_error(with(base, "clip_sample_range", nullptr).dump(), "clip_sample_range");
  parse_error(with(base, "_use_default_values", "timestep_spacing").dump(), "_use_default_values");
  parse_error(R"({"_class_name": "DDIMScheduler", "steps_offset": 1, "steps_offset": 0})", "steps_offset");
}

TEST(SchedulerConfig, MalformedJsonIsOneLineNamingTheFile) {
  for (const char* text : {R"({"_class_name": "DDIMScheduler",)", "[1, 2]", "", R"({"_class_name": DDIM})"}) {
    const std::string e = error_of([&] { parse_scheduler_config(text, "scheduler/scheduler_config.json"); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_PRED_FORMAT2(IsSubstring, "scheduler/scheduler_config.json", e) << text;
    EXPECT_NE(e, "<no error thrown>") << text;
  }
  const std::string missing = error_of([] { load_scheduler_config("/nonexistent/scheduler_config.json"); });
  EXPECT_PRED_FORMAT2(IsSubstring, "/nonexistent/scheduler_config.json", missing);
}

TEST(SchedulerConfig, VariantsAreRefusedForTheSamplersThatReadThem) {
  const json base = base_config("EulerDiscreteScheduler");
  for (const char* key : {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas"}) {
    const json config = with(base, key, true);
    plan_error(config.dump(), SamplerKind::Euler, key);
    EXPECT_NO_THROW(plan_of(config, SamplerKind::Ddim, 4)) << key;  // DDIMScheduler does not read it
    // Nor does EulerAncestralDiscreteScheduler: its from_config drops the key and runs its usual sigmas.
    expect_same_plan(plan_of(config, SamplerKind::EulerAncestral, 4), plan_of(base, SamplerKind::EulerAncestral, 4));
  }
  for (const auto& [key, value] : {std::pair<const char*, json>{"interpolation_type", "log_linear"},
                                   {"final_sigmas_type", "sigma_min"}, {"timestep_type", "continuous"},
                                   {"thresholding", true}})
    expect_same_plan(plan_of(with(base, key, value), SamplerKind::EulerAncestral, 4),
                     plan_of(base, SamplerKind::EulerAncestral, 4));
  plan_error(with(base, "interpolation_type", "log_linear").dump(), SamplerKind::Euler, "interpolation_type");
  plan_error(with(base, "final_sigmas_type", "sigma_min").dump(), SamplerKind::Euler, "final_sigmas_type");
  plan_error(with(base, "timestep_type", "continuous").dump(), SamplerKind::Euler, "timestep_type");
  for (SamplerKind k : {SamplerKind::Lcm, SamplerKind::Ddim})
    plan_error(with(base, "thresholding", true).dump(), k, "thresholding");
  EXPECT_NO_THROW(plan_of(with(base, "thresholding", true), SamplerKind::Euler, 4));
}

// Euler ancestral's step to sigma' is Euler's step to sigma_down = sigma'^2 / sigma plus fresh noise of standard
// deviation sigma_up = sigma' sqrt(1 - sigma'^2 / sigma^2), so that sigma_down^2 + sigma_up^2 = sigma'^2: checked
// against the sigmas of Euler's own plan (epsilon: x' = x + (sigma' - sigma) out), under every spacing, txt2img
// and img2img; the start, timesteps and input scales are Euler's. At a step to sigma' = 0 (every schedule's
// last) both are 0 and the step is Euler's: one step of "trailing" (SD-Turbo's and SDXL-Turbo's real-time
// frame) is Euler's plan exactly, and so is img2img's single last step.
TEST(EulerAncestral, SplitsEulersStepIntoADeterministicPartAndFreshNoise) {
  const json base = base_config("EulerAncestralDiscreteScheduler");
  for (const char* spacing : {"trailing", "leading", "linspace"}) {
    for (int steps : {1, 2, 4, 7}) {
      for (float strength : {1.0f, 0.5f}) {
        if (int(steps * strength) == 0) continue;
        SCOPED_TRACE(cat(spacing, ", ", steps, " steps at strength ", strength));
        const json config = with(base, "timestep_spacing", spacing);
        const SamplerPlan euler = plan_of(config, SamplerKind::Euler, steps, strength),
                          ancestral = plan_of(config, SamplerKind::EulerAncestral, steps, strength);
        ASSERT_EQ(ancestral.steps.size(), euler.steps.size());
        EXPECT_EQ(ancestral.start_noise_coef, euler.start_noise_coef);
        EXPECT_EQ(ancestral.start_latent_coef, euler.start_latent_coef);
        // Euler's sigmas from its steps, back from the last one's sigma' = 0 (epsilon: out_coef = sigma' - sigma).
        const size_t n = euler.steps.size();
        std::vector<double> sigmas(n + 1, 0.0);
        for (size_t i = n; i-- > 0;) sigmas[i] = sigmas[i + 1] - euler.steps[i].out_coef;
        for (size_t i = 0; i < n; ++i) {
          SCOPED_TRACE(cat("step ", i));
          const SamplerStep &e = euler.steps[i], &a = ancestral.steps[i];
          const double sigma = sigmas[i], to = sigmas[i + 1];
          EXPECT_EQ(a.timestep, e.timestep);
          EXPECT_EQ(a.input_scale, e.input_scale);
          EXPECT_EQ(a.x_coef, 1.0f);
          const double up = a.noise_coef, down = sigma + a.out_coef;
          if (i + 1 == n) {
            EXPECT_EQ(a.noise_coef, 0.0f);
            EXPECT_EQ(a.out_coef, e.out_coef);
          } else {
            EXPECT_NEAR(down, to * to / sigma, 1e-6 * sigma);
            EXPECT_NEAR(up, to * std::sqrt(1 - to * to / (sigma * sigma)), 1e-6 * sigma);
            EXPECT_NEAR(down * down + up * up, to * to, 1e-6 * sigma * sigma);
            EXPECT_GT(up, 0.0);
          }
        }
        if (euler.steps.size() == 1) expect_same_plan(ancestral, euler);
      }
    }
  }
}

// v_prediction's step is epsilon's step of the same model, written in v: with x0 = x / (sigma^2 + 1) -
// v sigma / sqrt(sigma^2 + 1), the epsilon the U-Net would have given is (x - x0) / sigma. So the v plan applied to
// (x, v) must equal the epsilon plan applied to (x, that epsilon), the fresh noise included, for fresh x, v and
// noise at every step (the sigma from the plan's input scale).
TEST(EulerAncestral, VPredictionIsEpsilonsStepInV) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const json base = with(base_config("EulerAncestralDiscreteScheduler"), "timestep_spacing", "trailing");
  for (int steps : {2, 4}) {
    const SamplerPlan eps = plan_of(base, SamplerKind::EulerAncestral, steps),
                      v = plan_of(with(base, "prediction_type", "v_prediction"), SamplerKind::EulerAncestral, steps);
    ASSERT_EQ(v.steps.size(), eps.steps.size());
    for (size_t i = 0; i < v.steps.size(); ++i) {
      SCOPED_TRACE(cat(steps, " steps, step ", i));
      const SamplerStep &e = eps.steps[i], &p = v.steps[i];
      EXPECT_EQ(p.noise_coef, e.noise_coef);
      EXPECT_EQ(p.input_scale, e.input_scale);
      const double s2 = 1.0 / (double(e.input_scale) * e.input_scale) - 1, sigma = std::sqrt(s2);
      const std::vector<float> x = rng.normal_vector(16, float(sigma)), out = rng.normal_vector(16),
                               noise = rng.normal_vector(16);
      std::vector<float> epsilon(x.size());
      for (size_t k = 0; k < x.size(); ++k) {
        const double x0 = x[k] / (s2 + 1) - out[k] * sigma / std::sqrt(s2 + 1);
        epsilon[k] = float((x[k] - x0) / sigma);
      }
      EXPECT_LE(test::rel_l2(combine(p.x_coef, x, p.out_coef, out, p.noise_coef, noise),
                             combine(e.x_coef, x, e.out_coef, epsilon, e.noise_coef, noise)),
                1e-5);
    }
  }
}

// SDXL-Turbo's scheduler_config.json names EulerAncestralDiscreteScheduler at "trailing" spacing: rtvd runs
// euler_a by default (unless --sampler says otherwise), its single real-time step from t = 999 with no noise,
// and its 4 steps adding noise after every step but the last.
TEST(EulerAncestral, SdxlTurbosSchedulerConfigPicksIt) {
  const json turbo = R"({"_class_name": "EulerAncestralDiscreteScheduler", "_diffusers_version": "0.24.0.dev0",
    "beta_end": 0.012, "beta_schedule": "scaled_linear", "beta_start": 0.00085, "clip_sample": false,
    "interpolation_type": "linear", "num_train_timesteps": 1000, "prediction_type": "epsilon",
    "sample_max_value": 1.0, "set_alpha_to_one": false, "skip_prk_steps": true, "steps_offset": 1,
    "timestep_spacing": "trailing", "trained_betas": null, "use_karras_sigmas": false})"_json;
  const SchedulerConfig cfg = parse_scheduler_config(turbo.dump(), "sdxl-turbo/scheduler/scheduler_config.json");
  EXPECT_EQ(cfg.native_sampler(), SamplerKind::EulerAncestral);
  EXPECT_EQ(cfg.sampler_for(std::nullopt), SamplerKind::EulerAncestral) << "no --sampler: the scheduler's own";
  EXPECT_EQ(cfg.sampler_for(SamplerKind::Euler), SamplerKind::Euler) << "--sampler wins";
  const SamplerPlan one = make_sampler_plan(cfg, cfg.sampler_for(std::nullopt), 1, 1.0f);
  ASSERT_EQ(one.steps.size(), 1u);
  EXPECT_EQ(one.steps[0].timestep, 999.0);
  EXPECT_EQ(one.steps[0].noise_coef, 0.0f);
  const SamplerPlan four = make_sampler_plan(cfg, cfg.sampler_for(std::nullopt), 4, 1.0f);
  ASSERT_EQ(four.steps.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(four.steps[i].noise_coef > 0.0f, i < 3) << "step " << i;
}

TEST(SamplerPlan, StepsAndStrengthOutOfRange) {
  const SchedulerConfig cfg = parse_scheduler_config(base_config("DDIMScheduler").dump(), "config");
  for (SamplerKind k : kSdSamplers) {
    SCOPED_TRACE(sampler_name(k));
    // img2img keeps int(steps * strength) steps: 4 * 0.2 leaves none.
    const std::string none = error_of([&] { make_sampler_plan(cfg, k, 4, 0.2f); });
    EXPECT_PRED_FORMAT2(IsSubstring, "--strength", none);
    EXPECT_PRED_FORMAT2(IsSubstring, "--steps", none);
    EXPECT_EQ(none.find('\n'), std::string::npos);
    for (float bad : {0.0f, -0.5f, 1.5f, std::nanf("")})
      EXPECT_PRED_FORMAT2(IsSubstring, "--strength", error_of([&] { make_sampler_plan(cfg, k, 4, bad); }));
    for (int bad : {0, -1, 1001})
      EXPECT_PRED_FORMAT2(IsSubstring, "--steps", error_of([&] { make_sampler_plan(cfg, k, bad, 1.0f); }));
    // strength as written: int(10 * 0.7) = 7 in Python, while the float nearest 0.7 times 10 is 6.99999988.
    EXPECT_EQ(make_sampler_plan(cfg, k, 10, 0.7f).steps.size(), 7u);
    EXPECT_EQ(make_sampler_plan(cfg, k, 4, 0.5f).steps.size(), 2u);
  }
  // LCM picks its steps from original_inference_steps (50) timesteps.
  EXPECT_PRED_FORMAT2(IsSubstring, "--steps", error_of([&] { make_sampler_plan(cfg, SamplerKind::Lcm, 51, 1.0f); }));
  // numpy's arange gives "trailing" one timestep too many at 61 of 1000 steps; diffusers' last is then -1.
  const SchedulerConfig trailing =
      parse_scheduler_config(with(base_config("DDIMScheduler"), "timestep_spacing", "trailing").dump(), "config");
  expect_config_error(error_of([&] { make_sampler_plan(trailing, SamplerKind::Euler, 61, 1.0f); }), "config",
                      "timestep_spacing");
  EXPECT_EQ(make_sampler_plan(trailing, SamplerKind::Euler, 60, 1.0f).steps.size(), 60u);
  // "leading" at every training timestep ends past the range (999 + steps_offset 1).
  EXPECT_PRED_FORMAT2(IsSubstring, "--steps", error_of([&] { make_sampler_plan(cfg, SamplerKind::Ddim, 1000, 1.0f); }));
}

// Rectified flow's Euler steps as a SamplerPlan: along x_t = (1 - t) image + t noise the velocity is the constant
// noise - image, which Euler integrates exactly, so the plan's start and steps applied to it in fp32 must land
// on the image from any strength, at any step count; the U-Net sees each step's flow time t_i exactly (its
// timestep over timestep_scale) on the shifted grid t = s 4u / (1 + 3u).
TEST(FlowSampler, StepsCarryTheStartToTheImageOnTheShiftedGrid) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<float> image = rng.normal_vector(64), noise = rng.normal_vector(64);
  for (int steps : {1, 2, 4, 7}) {
    for (float strength : {1.0f, 0.6f, 0.25f}) {
      SCOPED_TRACE(cat(steps, " steps at strength ", strength));
      const float scale = rng.integer(0, 1) ? 1000.0f : 1.0f;
      const SamplerPlan p = flow_sampler_plan(steps, strength, scale);
      ASSERT_EQ(p.steps.size(), size_t(steps));
      EXPECT_EQ(p.start_noise_coef, strength);
      EXPECT_EQ(p.start_latent_coef, 1.0f - strength);
      std::vector<float> x = combine(p.start_noise_coef, noise, p.start_latent_coef, image);
      for (int i = 0; i < steps; ++i) {
        const SamplerStep& st = p.steps[i];
        const double u = double(steps - i) / steps;
        EXPECT_EQ(float(st.timestep / scale), float(strength * 4 * u / (1 + 3 * u))) << "step " << i;
        EXPECT_EQ(st.input_scale, 1.0f);
        EXPECT_EQ(st.x_coef, 1.0f);
        EXPECT_EQ(st.noise_coef, 0.0f);
        EXPECT_LT(st.out_coef, 0.0f);
        std::vector<float> v(x.size());
        for (size_t k = 0; k < v.size(); ++k) v[k] = noise[k] - image[k];
        x = combine(st.x_coef, x, st.out_coef, v);
      }
      EXPECT_LE(test::rel_l2(x, image), 1e-5);  // a few fp32 roundings per step
    }
  }
  EXPECT_EQ(flow_sampler_plan(2, 1.0f, 1.0f).steps[1].timestep, double(0.8f));  // u = 1/2: 2 / 2.5
}

// Which guidance scales run the unconditional half (batch 2): diffusers' pipelines above 1 only, rtvd's flow
// models at every scale but 1.
TEST(SamplerPlan, GuidanceRuleDecidesTheBatch) {
  const SchedulerConfig cfg = parse_scheduler_config(base_config("DDIMScheduler").dump(), "config");
  const SamplerPlan flow = flow_sampler_plan(4, 1.0f, 1000.0f);
  for (SamplerKind k : kSdSamplers) {
    const SamplerPlan ddpm = make_sampler_plan(cfg, k, 4, 1.0f);
    for (float g : {0.0f, 0.5f, 1.0f, 1.01f, 3.0f, 30.0f}) {
      EXPECT_EQ(ddpm.batch(g), g > 1.0f ? 2 : 1) << sampler_name(k) << " at guidance " << g;
      EXPECT_EQ(flow.batch(g), g == 1.0f ? 1 : 2) << "flow at guidance " << g;
    }
  }
}

TEST(SamplerNames, RoundTripAndRefusal) {
  for (const std::string& name : sampler_names()) EXPECT_EQ(sampler_name(sampler_named(name)), name);
  EXPECT_EQ(sampler_names(), (std::vector<std::string>{"euler", "euler_a", "lcm", "ddim"}));
  const std::string e = error_of([] { sampler_named("dpm++"); });
  EXPECT_PRED_FORMAT2(IsSubstring, "--sampler", e);
  EXPECT_PRED_FORMAT2(IsSubstring, "dpm++", e);
}

// The values --prediction-type and --timestep-spacing take are the config's spellings, each its own type.
TEST(SchedulerNames, PredictionTypesAndSpacingsRoundTripAndRefusal) {
  EXPECT_EQ(prediction_type_names(), (std::vector<std::string>{"epsilon", "v_prediction"}));
  for (const std::string& name : prediction_type_names())
    EXPECT_EQ(prediction_type_name(prediction_type_named(name)), name);
  EXPECT_EQ(timestep_spacing_names(), (std::vector<std::string>{"leading", "trailing", "linspace"}));
  for (const std::string& name : timestep_spacing_names())
    EXPECT_EQ(timestep_spacing_name(timestep_spacing_named(name)), name);
  EXPECT_EQ(error_of([] { prediction_type_named("v"); }), "prediction type 'v': expected epsilon or v_prediction");
  EXPECT_EQ(error_of([] { timestep_spacing_named("Leading"); }),
            "timestep spacing 'Leading': expected leading, trailing or linspace");
}

}  // namespace
}  // namespace rtvd
