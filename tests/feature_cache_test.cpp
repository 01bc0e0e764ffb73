// The temporal feature cache (FrameSettings::cache_refresh, pipeline/cached_frame.h), on each backend (the GPU
// case skips without a device): the cached frame on the input its cache was written from gives the full
// frame's output, and reads the cache; on a moving source the refresh frames are the uncached frames and the
// cached ones stay near them; the setting's bad values and models are refused with one line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "pipeline/frame_plan.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/models/model.h"
#include "pipeline/models/random_weights.h"
#include "support/controlnet_reference.h"
#include "support/process.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

class FeatureCacheOnDevice : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (GetParam() == "cuda" && cuda_devices(&why).empty()) GTEST_SKIP() << why;
    device = device_kind_named(GetParam());
  }
  // Equal "to rounding": the same kernels on the same inputs (fixed kernels on the GPU: --kernels custom).
  double tolerance() const { return device == DeviceKind::Cuda ? 2e-3 : 1e-5; }
  EngineOptions engine_options(int size) const {
    EngineOptions o;
    o.device = device;
    if (device == DeviceKind::Cuda) o.kernels = KernelFamily::Custom;
    o.width = o.height = size;
    return o;
  }
  // Two steps at --blend 0: a frame depends on its index and source alone.
  static FrameSettings blendless_settings(test::Rng& rng) {
    FrameSettings s;
    s.seed = rng.gen();
    s.steps = 2;
    s.blend = 0.0f;
    return s;
  }
  DeviceKind device = DeviceKind::Cpu;
};

// One img2img plan on a backend, driven by hand so that two frames can run on the same inputs.
struct PlanOnBackend {
  const Model& model;
  FramePlan plan;
  std::unique_ptr<Backend> backend;

  PlanOnBackend(const Model& m, const FrameSettings& s, int size, DeviceKind device, test::Rng& rng) : model(m) {
    backend = make_backend(device, device == DeviceKind::Cuda ? 0 : 2,
                           device == DeviceKind::Cuda ? KernelFamily::Custom : KernelFamily::Auto, nullptr);
    plan = build_frame_plan(model, frame_sampler(model, s, true), s, true, size, size, int(backend->act_bytes()));
    backend->upload_weights(*model.weights);
    backend->prepare(plan.graph);
    if (plan.class_ids) {
      const int32_t ids[2] = {s.class_id, model.config.null_class()};
      backend->write(plan.class_ids, ids, plan.batch);
    }
    if (plan.context) {
      const auto context = rng.vector(size_t(plan.batch) * model.config.context_length * model.config.cross_attention_dim);
      backend->write(plan.context, context.data(), context.size());
    }
    for (size_t k = 0; k < plan.canny_thresholds.size(); ++k)
      if (plan.canny_thresholds[k]) {
        const int32_t thresholds[2] = {s.controlnets.at(k).canny_low, s.controlnets.at(k).canny_high};
        backend->write(plan.canny_thresholds[k], thresholds, 2);
      }
    backend->run_setup();
    sample = rng.normal_vector(size_t(plan.latent_width) * plan.latent_height * model.config.in_channels);
    image = rng.vector(size_t(size) * size * model.image_channels());
    if (plan.noise) noise = rng.normal_vector(sample.size() * plan.noise_steps.size());
  }

  // The frame on the inputs drawn at construction (the sampler overwrites the sample: written every time);
  // the blend history it leaves, which at --blend 0 is the frame itself. The history before it is finite (the
  // image): 0 times a NaN that a frame of a poisoned cache left would be NaN.
  std::vector<float> run(FrameOps which) {
    backend->write(plan.prev, image.data(), image.size());
    backend->write(plan.sample, sample.data(), sample.size());
    backend->write(plan.image, image.data(), image.size());
    if (plan.noise) backend->write(plan.noise, noise.data(), noise.size());
    backend->run_frame(which);
    std::vector<float> out(image.size());
    backend->read(plan.prev, out.data(), out.size());
    return out;
  }

  void poison_cache() {
    for (const Ref& deep : plan.feature_cache) {
      const TensorInfo& t = plan.graph.tensors.at(deep.id);
      const std::vector<float> nan = test::poisoned(size_t(t.numel()));
      backend->write(deep, nan.data(), nan.size());
    }
  }

  std::vector<float> sample, image, noise;
};

// The refresh, then the cached frame on the same inputs: the cached frame's output (its blend history at --blend 0)
// and the full frame's, and with the cache poisoned after the refresh the cached frame's again.
struct RefreshThenCached {
  std::vector<float> full, cached, cached_poisoned, full_again;
};
RefreshThenCached refresh_then_cached(PlanOnBackend& p) {
  RefreshThenCached r;
  p.poison_cache();
  r.full = p.run(FrameOps::Full);
  r.cached = p.run(FrameOps::Cached);
  p.poison_cache();
  r.cached_poisoned = p.run(FrameOps::Cached);
  r.full_again = p.run(FrameOps::Full);
  return r;
}

// The blend history the engine's last frame left: at --blend 0, that frame.
std::vector<float> history(Engine& e) {
  std::vector<float> v(size_t(e.width()) * e.height() * e.model().image_channels());
  e.backend().read(e.plan().prev, v.data(), v.size());
  return v;
}

// Refresh then cached frame on the same source and noise: the cached frame's U-Net passes get the deep
// features of their own inputs, so it is the full frame (each step its own cache: with one cache for all
// steps it would not be). The refresh writes every cache (poisoned before it), the cached frame reads them
// (poisoned after it, its frame is not finite). The default model (3 levels, BatchNorm, the last step fused
// with the blend) and tiny_sd (2 levels, GroupNorm, cross-attention at the top level, a decoder), with
// guidance (the batch [cond | uncond] cached whole) and without.
TEST_P(FeatureCacheOnDevice, TheCachedFrameOnItsRefreshInputIsTheFullFrame) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Model emoji = load_embedded_model();
  const Model tiny_sd = load_model({.path = test::test_data("tiny_sd")});
  for (const auto& [model, size] : {std::pair{&emoji, 16}, std::pair{&tiny_sd, 64}}) {
    for (const float guidance : {1.0f, 3.0f}) {
      SCOPED_TRACE(cat(model->config.name, ", guidance ", guidance));
      FrameSettings s;
      s.seed = rng.gen();
      s.steps = 3;
      s.guidance = guidance;
      s.blend = 0.0f;
      s.strength = 0.8f;
      s.cache_refresh = 2;
      PlanOnBackend p(*model, s, size, device, rng);
      ASSERT_EQ(p.plan.feature_cache.size(), p.plan.sampler.steps.size());
      ASSERT_LT(p.plan.graph.cached_frame.size(), p.plan.graph.frame.size());

      const RefreshThenCached r = refresh_then_cached(p);
      ASSERT_TRUE(test::all_finite(r.full));
      EXPECT_LE(test::max_abs_diff(r.cached, r.full), tolerance());
      EXPECT_FALSE(test::all_finite(r.cached_poisoned)) << "the cached frame reads the cache";
      EXPECT_LE(test::max_abs_diff(r.full_again, r.full), tolerance()) << "a refresh rewrites it";
    }
  }
}

// The same with ControlNets (tests/data/tiny_controlnet's two nets on tiny_sd: the Canny edges of the source and
// the source itself): the cached frame runs each net's top level alone, whose residuals are the full frame's for
// the top level's skips, so on the refresh's inputs it is the full frame; guided, and in guess mode (the
// unconditional half without residuals). The nets move the frame well beyond the tolerance, so that a cached
// frame that dropped them would fail.
TEST_P(FeatureCacheOnDevice, WithControlNetsTheCachedFrameOnItsRefreshInputIsTheFullFrame) {
  const std::string nets = test::tiny_controlnet_dir();
  if (nets.empty()) return;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Model plain = load_model({.path = test::test_data("tiny_sd")});
  const Model with_nets = load_model({.path = test::test_data("tiny_sd"), .controlnets = {nets + "/net1", nets + "/net2"}});
  for (const bool guess : {false, true}) {
    SCOPED_TRACE(guess ? "guess mode" : "plain");
    FrameSettings s;
    s.seed = rng.gen();
    s.steps = 3;
    s.guidance = 3.0f;
    s.blend = 0.0f;
    s.strength = 0.8f;
    s.cache_refresh = 2;
    s.guess_mode = guess;
    s.controlnets = {{.scale = 0.9f, .preprocessor = ControlPreprocessor::Canny},
                     {.scale = 0.7f, .preprocessor = ControlPreprocessor::Source}};
    const uint64_t seed = rng.gen();
    test::Rng inputs(seed), same_inputs(seed);
    PlanOnBackend p(with_nets, s, 64, device, inputs);
    const RefreshThenCached r = refresh_then_cached(p);
    ASSERT_TRUE(test::all_finite(r.full));
    EXPECT_LE(test::max_abs_diff(r.cached, r.full), tolerance());
    EXPECT_FALSE(test::all_finite(r.cached_poisoned)) << "the cached frame reads the cache";
    EXPECT_LE(test::max_abs_diff(r.full_again, r.full), tolerance()) << "a refresh rewrites it";

    FrameSettings no_nets = s;
    no_nets.controlnets.clear();
    no_nets.guess_mode = false;
    PlanOnBackend q(plain, no_nets, 64, device, same_inputs);
    EXPECT_GT(test::max_abs_diff(q.run(FrameOps::Full), r.full), 100 * tolerance()) << "the nets count";
  }
}

// A moving source (a pattern that moves a pixel per frame) at --blend 0, so that a frame depends on its
// index and source alone: with a refresh every 3 frames, frames 0, 3 and 6 are the uncached engine's to the
// bit (to rounding on the GPU), and the cached ones differ from it, on average by less than the uncached frame
// moved since the refresh (the cache is worth more than showing the refresh frame again). On average: with
// random weights at 32x32 one cached frame's error can come within a percent of its motion either way (on the
// GPU, 0.473 against 0.472 once). Prints the errors.
TEST_P(FeatureCacheOnDevice, OnAMovingSourceRefreshFramesAreTheUncachedOnesAndCachedOnesStayNear) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const EngineOptions o = engine_options(32);
  FrameSettings s = blendless_settings(rng);
  Engine uncached(o), cached(o);
  uncached.configure(s, true);
  s.cache_refresh = 3;
  s.cache_similarity = 0;  // the period alone (this pattern moves far at 32x32: the default would refresh more)
  cached.configure(s, true);

  const float phase = rng.uniform(0.0f, 6.0f);
  const auto source = [&](int frame) {
    std::vector<float> image;
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c)
          image.push_back(0.8f * std::sin(0.35f * float(x + frame) + phase + 2.0f * float(c)) * std::cos(0.2f * float(y)));
    return image;
  };
  std::vector<float> refresh;
  std::string report;
  double errors = 0, motion = 0;
  for (int f = 0; f < 7; ++f) {
    const std::vector<float> image = source(f);
    uncached.step(&image);
    cached.step(&image);
    const std::vector<float> want = history(uncached), got = history(cached);
    ASSERT_TRUE(test::all_finite(got)) << "frame " << f;
    if (f % 3 == 0) {
      EXPECT_LE(test::max_abs_diff(got, want), device == DeviceKind::Cuda ? tolerance() : 0.0) << "refresh frame " << f;
      refresh = want;
      continue;
    }
    const double error = test::rel_l2(got, want), moved = test::rel_l2(refresh, want);
    EXPECT_GT(error, 0.0) << "frame " << f << " ran the full U-Net";
    errors += error;
    motion += moved;
    report += cat(" frame ", f, ": ", error, " (moved ", moved, ");");
  }
  EXPECT_LT(errors, motion) << "the cached frames' errors summed against the motion since their refreshes";
  std::printf("feature cache, refresh every 3, cached frames' relative L2 error against the uncached:%s\n", report.c_str());
}

// A cut in the source (another picture) refreshes the cache at once, whatever the period: at --blend 0 that
// frame is the uncached engine's, and the frames on an unchanged source are cached. With --cache-similarity 0
// the same cut is a cached frame (the period alone decides), which differs from the uncached one.
TEST_P(FeatureCacheOnDevice, ASourceCutRefreshesTheCacheAtOnce) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const EngineOptions o = engine_options(32);
  FrameSettings s = blendless_settings(rng);
  Engine uncached(o);
  uncached.configure(s, true);
  s.cache_refresh = kMaxCacheRefresh;
  const std::vector<float> a = rng.vector(size_t(32) * 32 * 3), b = rng.vector(a.size());
  const std::vector<const std::vector<float>*> sources = {&a, &a, &a, &b, &b};
  std::vector<std::vector<float>> want;
  for (const std::vector<float>* source : sources) {
    uncached.step(source);
    want.push_back(history(uncached));
  }
  for (const float threshold : {kDefaultCacheSimilarity, 0.0f}) {
    SCOPED_TRACE(cat("--cache-similarity ", threshold));
    s.cache_similarity = threshold;
    Engine cached(o);
    cached.configure(s, true);
    for (size_t f = 0; f < sources.size(); ++f) {
      const int64_t full_before = cached.full_frames();
      cached.step(sources[f]);
      const bool full = f == 0 || (f == 3 && threshold > 0);
      EXPECT_EQ(cached.full_frames() - full_before, full ? 1 : 0) << "frame " << f;
      const std::vector<float> got = history(cached);
      if (full) EXPECT_LE(test::max_abs_diff(got, want[f]), device == DeviceKind::Cuda ? tolerance() : 0.0) << "frame " << f;
      else EXPECT_GT(test::rel_l2(got, want[f]), 1e-3) << "frame " << f << " is cached";
    }
    EXPECT_EQ(cached.source_refreshes(), threshold > 0 ? 1 : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, FeatureCacheOnDevice, testing::Values("cpu", "cuda"));

// The engine's guard (for every caller: the CLI's bound is the same, tested in cli_test): a period outside
// [0, 100], and a model whose U-Net has no level below the top, each one line naming --feature-cache.
TEST(FeatureCache, BadPeriodsAndOneLevelModelsAreRefusedNamingTheFlag) {
  EngineOptions o;
  o.device = DeviceKind::Cpu;
  o.width = o.height = 16;
  Engine engine(o);
  FrameSettings s;
  for (const int bad : {-1, kMaxCacheRefresh + 1}) {
    s.cache_refresh = bad;
    EXPECT_EQ(test::error_of([&] { engine.configure(s, false); }),
              cat("--feature-cache ", bad, ": expected 0 (off) to 100 frames"));
  }

  const test::TempDir temp("rtvd_feature_cache");
  nlohmann::json config = nlohmann::json::parse(test::read_file(test::test_data("tiny_group/config.json")));
  config["name"] = "tiny_group, one level (test only)";
  config["block_out_channels"] = {8};
  config["attention_levels"] = {false};
  config["mid_attention"] = false;
  config["cross_attention_dim"] = 0;
  std::ofstream(temp.path("config.json")) << config.dump(2);
  const SafeTensorsFile weights = random_checkpoint(load_model_config(temp.path("config.json")), 1);
  std::vector<TensorToWrite> tensors;
  for (const TensorView& t : weights.tensors())
    tensors.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes)});
  write_safetensors(temp.path("weights.safetensors"), tensors);
  o.model.path = temp.dir().string();
  o.width = o.height = 8;
  Engine one_level(o);
  s.cache_refresh = 2;
  EXPECT_EQ(test::error_of([&] { one_level.configure(s, false); }),
            "--feature-cache 2: the U-Net of tiny_group, one level (test only) has a single level, none deeper to cache "
            "(the cache needs 2 levels or more)");
  s.cache_refresh = 0;
  EXPECT_NO_THROW(one_level.configure(s, false));
}

}  // namespace
}  // namespace rtvd
