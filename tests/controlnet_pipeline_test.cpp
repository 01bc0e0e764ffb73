// The latent frame with ControlNets on the CPU (fp32) against diffusers' StableDiffusionControlNetPipeline and
// StableDiffusionControlNetImg2ImgPipeline on tests/data/tiny_sd with tests/data/tiny_controlnet's two nets, as
// tools/reference/export_tiny_controlnet.py ran them (pipelines.json): one net and two, their scales, starts and
// ends over the steps that run (img2img's too), guidance, and guess mode with guidance. The final latents and the
// decoded image at relative L2 <= 1e-4; and the frame without the nets is far from diffusers', so that the
// comparison sees them. Then what the frame refuses and counts: a net for another architecture, settings no frame
// can run, the nets' memory; and what a net costs, nothing at scale 0.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "base/error.h"
#include "kernels/canny/canny.h"
#include "pipeline/backends/profiler.h"
#include "pipeline/device.h"
#include "pipeline/engine.h"
#include "pipeline/frame_memory.h"
#include "pipeline/frame_plan.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/models/controlnet.h"
#include "pipeline/models/model.h"
#include "support/controlnet_reference.h"
#include "support/sd_pipeline_reference.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

test::PipelineReference controlnet_reference() {
  const std::string dir = test::tiny_controlnet_dir();
  test::PipelineReference ref = test::read_pipeline_reference(dir, test::test_data("tiny_sd"), "");
  ref.controlnet_dir = dir;
  return ref;
}

class ControlNetPipeline : public testing::TestWithParam<int> {};

TEST_P(ControlNetPipeline, MatchesDiffusers) {
  test::PipelineReference ref = controlnet_reference();
  ASSERT_EQ(ref.cases.size(), 7u) << "pipelines.json: a run failed when it was exported";
  const std::string name = ref.cases.at(GetParam())["name"];
  const test::PipelineErrors e = test::run_pipeline_case(ref, GetParam(), DeviceKind::Cpu, KernelFamily::Auto, 1);
  std::printf("%s: latents rel_l2 %.3g, image rel_l2 %.3g\n", name.c_str(), e.latents, e.image);
  EXPECT_LE(e.latents, 1e-4);
  ASSERT_TRUE(e.has_image);
  EXPECT_LE(e.image, 1e-4);

  // The same frame without the nets misses diffusers' by far more than the tolerance.
  ref.cases.at(GetParam())["nets"] = nlohmann::json::array();
  const test::PipelineErrors without = test::run_pipeline_case(ref, GetParam(), DeviceKind::Cpu, KernelFamily::Auto, 1);
  EXPECT_GT(without.latents, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Cases, ControlNetPipeline, testing::Range(0, 7), [](const testing::TestParamInfo<int>& i) {
  return controlnet_reference().cases.at(i.param)["name"].get<std::string>();
});

using test::error_of;

// One line naming --controlnet, the net's path and the field that disagrees.
void expect_architecture_error(const std::string& e, const std::string& path, const std::string& field) {
  EXPECT_NE(e.find("--controlnet " + path), std::string::npos) << e;
  EXPECT_NE(e.find("another architecture"), std::string::npos) << e;
  EXPECT_NE(e.find(field), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// tiny_sd's nets (SD 1.x's structure) on an SDXL model, and on U-Nets of SD 2.x's kind (another context width) or
// other channels: refused as the model loads, naming the net and the field.
TEST(ControlNetModel, NetOfAnotherArchitectureIsRefused) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  const std::string net = dir + "/net1";
  ModelOptions o;
  o.path = test::test_data("tiny_sdxl_pipeline/model");
  o.controlnets = {net};
  expect_architecture_error(error_of([&] { load_model(o); }), net, "cross_attention_dim");

  const std::string unet = test::test_data("tiny_sd/unet/config.json");
  const ModelConfig sd = parse_diffusers_unet_config(read_config_file(unet), unet, DType::F32);
  EXPECT_NO_THROW(open_model_controlnet(net, sd, unet, 2));
  ModelConfig sd2 = sd;
  sd2.cross_attention_dim = 3 * sd.cross_attention_dim;
  expect_architecture_error(error_of([&] { open_model_controlnet(net, sd2, unet, 2); }), net, "cross_attention_dim");
  ModelConfig wider = sd;
  wider.block_out_channels.back() *= 2;
  expect_architecture_error(error_of([&] { open_model_controlnet(net, wider, unet, 2); }), net, "block_out_channels");
  // A net whose control image is not the image's size (an autoencoder of another factor).
  const std::string e = error_of([&] { open_model_controlnet(net, sd, unet, 8); });
  EXPECT_NE(e.find("--controlnet " + net), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

Model tiny_sd_with(const std::vector<std::string>& nets) {
  ModelOptions o;
  o.path = test::test_data("tiny_sd");
  o.controlnets = nets;
  return load_model(o);
}

// Settings no frame with nets can run: one line each, naming the flag.
TEST(ControlNetModel, SettingsTheFrameCannotRunAreRefused) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  const Model m = tiny_sd_with({dir + "/net1"});
  const auto refused = [&](FrameSettings s, const std::string& flag) {
    const std::string e = error_of([&] { check_controlnet_settings(m, s, true, s.steps); });
    EXPECT_NE(e.find(flag), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  FrameSettings s;
  EXPECT_NO_THROW(check_controlnet_settings(m, s, true, s.steps));
  s.stream_batch = 4;
  refused(s, "--stream-batch");  // 4 steps: frames in flight at different steps
  s.steps = 1;
  EXPECT_NO_THROW(check_controlnet_settings(m, s, true, 1));  // every frame in flight at step 0
  for (const auto& [start, end] : {std::pair{0.5, 0.5}, {-0.1, 1.0}, {0.0, 1.5}}) {
    s = {};
    s.controlnets = {{1.0f, start, end}};
    refused(s, "--control-start");
  }
  s = {};
  s.controlnets = {{}, {}};  // settings for a second net the model does not have
  refused(s, "ControlNet 2");
}

// diffusers' controlnet_keep: the steps whose fraction [i/n, (i+1)/n] lies within [start, end].
TEST(ControlNetModel, RunsAtTheStepsDiffusersKeeps) {
  const auto runs = [](double start, double end, int n) {
    std::vector<int> out;
    for (int i = 0; i < n; ++i) out.push_back(controlnet_runs({1.0f, start, end}, i, n));
    return out;
  };
  EXPECT_EQ(runs(0, 1, 4), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(runs(0, 0.5, 4), (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(runs(0.25, 1, 4), (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(runs(0.3, 0.7, 3), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(runs(0.5, 0.6, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(runs(0.3, 1, 10), (std::vector<int>{0, 0, 0, 1, 1, 1, 1, 1, 1, 1}));  // 3/10 is not below 0.3
}

// The frame's memory counts each net's weights (every kernel and matrix) and more activations.
TEST(ControlNetModel, FrameMemoryCountsTheNets) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  const Model plain = tiny_sd_with({}), two = tiny_sd_with({dir + "/net1", dir + "/net2"});
  ASSERT_EQ(two.controlnets.size(), 2u);
  const FrameMemory a = frame_memory(plain, 64, 64, 2, 4, 2), b = frame_memory(two, 64, 64, 2, 4, 2);
  int64_t net_weights = 0;
  for (const ModelControlNet& net : two.controlnets)
    for (const TensorSpec& t : controlnet_parameters(net.config))
      if (t.shape.size() >= 2) {
        int64_t n = 2;
        for (int64_t d : t.shape) n *= d;
        net_weights += n;
      }
  EXPECT_EQ(b.weights - a.weights, net_weights);
  EXPECT_GT(b.activations, a.activations + 2 * int64_t(64) * 64 * 3 * 4);  // at least the control images
}

// A 32x32 RGB image in [-1, 1] of rows of random steps: edges of every strength.
std::vector<float> smooth_rows(test::Rng& rng) {
  std::vector<float> source(size_t(32) * 32 * 3);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = i % (32 * 3) < 3 ? rng.uniform(-1, 1) : std::clamp(source[i - 3] + rng.uniform(-0.3f, 0.3f), -1.0f, 1.0f);
  return source;
}

// canny_cpu's edge map of a 32x32 image (the op OpenCV's Canny is tested against).
std::vector<float> canny_edges(const std::vector<float>& image, int low, int high) {
  std::vector<float> edges(image.size());
  const int32_t thresholds[2] = {low, high};
  CannyParams p{.x = image.data(), .thresholds = thresholds, .y = edges.data(), .n = 1, .h = 32, .w = 32, .c = 3};
  std::vector<uint8_t> workspace(canny_workspace_bytes(p));
  p.workspace = workspace.data();
  canny_cpu(p);
  return edges;
}

// tiny_sd with net 1, img2img on `source` ([-1, 1], 32x32): the final latents, the net's control image coming as
// `pre` says (Image: `control` in [-1, 1], from the host).
std::vector<float> img2img_latents(const Model& m, ControlPreprocessor pre, const std::vector<float>& source,
                                   const std::vector<float>& control, int low = 0, int high = 0) {
  FrameSettings s;
  s.steps = 2;
  s.guidance = 2.0f;
  s.controlnets = {{.scale = 1.0f, .preprocessor = pre, .canny_low = low, .canny_high = high}};
  auto cpu = make_cpu_backend(2);
  FramePlan plan = build_frame_plan(m, frame_sampler(m, s, true), s, true, 32, 32, int(cpu->act_bytes()));
  EXPECT_EQ(bool(plan.control_images.at(0)), pre == ControlPreprocessor::Image);
  EXPECT_EQ(bool(plan.canny_thresholds.at(0)), pre == ControlPreprocessor::Canny);
  // The profiler's ControlNet stage: every op of the net's model range, and its control image's ops.
  for (const DenoiseStage& step : plan.stages.steps) {
    EXPECT_EQ(step.models.size(), 2u);
    for (size_t i = step.models.front().begin; i < step.models.front().end; ++i)
      EXPECT_EQ(frame_stage(plan.graph.frame[i].layer), "ControlNet") << plan.graph.frame[i].layer;
    for (size_t i = step.models.back().begin; i < step.models.back().end; ++i)
      EXPECT_EQ(frame_stage(plan.graph.frame[i].layer), "U-Net") << plan.graph.frame[i].layer;
  }
  size_t image_ops = 0;
  for (const Op& op : plan.graph.frame) image_ops += op.layer.starts_with("controlnet.0.image") ||
                                                    op.layer.starts_with("controlnet.0.canny");
  EXPECT_EQ(image_ops, 2u);  // canny and cast, or cast and (x + 1) / 2
  plan.present_op().p.first = true;
  cpu->upload_weights(*m.weights);
  cpu->prepare(plan.graph);
  const std::vector<float> context(size_t(plan.graph.tensors.at(plan.context.id).numel()), 0.5f);
  cpu->write(plan.context, context.data(), context.size());
  cpu->run_setup();
  const std::vector<float> noise(size_t(16 * 16 * 4), 0.25f);
  cpu->write(plan.sample, noise.data(), noise.size());
  cpu->write(plan.image, source.data(), source.size());
  if (pre == ControlPreprocessor::Image) cpu->write(plan.control_images[0], control.data(), control.size());
  if (pre == ControlPreprocessor::Canny) {
    const int32_t thresholds[2] = {low, high};
    cpu->write(plan.canny_thresholds[0], thresholds, 2);
  }
  cpu->run_frame();
  std::vector<float> out(noise.size());
  cpu->read(plan.sample, out.data(), out.size());
  return out;
}

// The source image as the control (its [0, 1] values) and its Canny edges (canny_cpu's, the op OpenCV's Canny is
// tested against) give the frame that the same images given by the host give; a source without a source image
// is refused, naming --control.
TEST(ControlNetModel, PreprocessorsOfTheSource) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const Model m = tiny_sd_with({dir + "/net1"});
  const std::vector<float> source = smooth_rows(rng);
  EXPECT_LE(test::rel_l2(img2img_latents(m, ControlPreprocessor::Source, source, {}),
                         img2img_latents(m, ControlPreprocessor::Image, source, source)), 1e-6);

  const std::vector<float> edges = canny_edges(source, 60, 120);
  const double on = std::count(edges.begin(), edges.end(), 1.0f) / double(edges.size());
  ASSERT_GT(on, 0.05);  // edges and no edges: the comparison sees the map
  ASSERT_LT(on, 0.95);
  const std::vector<float> canny = img2img_latents(m, ControlPreprocessor::Canny, source, {}, 60, 120);
  std::vector<float> signed_edges = edges;  // 0 or 1 as the host gives images: -1 or 1
  for (float& v : signed_edges) v = 2 * v - 1;
  EXPECT_LE(test::rel_l2(canny, img2img_latents(m, ControlPreprocessor::Image, source, signed_edges)), 1e-6);
  EXPECT_GT(test::rel_l2(canny, img2img_latents(m, ControlPreprocessor::Image, source, source)), 1e-3);

  FrameSettings s;
  s.controlnets = {{.preprocessor = ControlPreprocessor::Canny}};
  const std::string e = error_of([&] { check_controlnet_settings(m, s, false, s.steps); });
  EXPECT_NE(e.find("--control canny"), std::string::npos) << e;
  EXPECT_NO_THROW(check_controlnet_settings(m, s, true, s.steps));
}

// tiny_sd with these nets on the CPU, at 32x32.
EngineOptions tiny_sd_engine(const std::vector<std::string>& nets) {
  EngineOptions o;
  o.model.path = test::test_data("tiny_sd");
  o.model.controlnets = nets;
  o.device = DeviceKind::Cpu;
  o.threads = 2;
  o.width = o.height = 32;
  return o;
}

// The engine with a Canny net: new thresholds take effect with no new plan (the same ops),
// and give the frame an engine made with them gives; a net whose control image comes from the host and was not
// given is one line naming it.
TEST(ControlNetEngine, CannyThresholdsChangeWithoutANewPlan) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const EngineOptions o = tiny_sd_engine({dir + "/net1"});
  const std::vector<float> source = smooth_rows(rng);
  FrameSettings s;
  s.steps = 2;
  s.controlnets = {{.scale = 2.0f, .preprocessor = ControlPreprocessor::Canny, .canny_low = 20, .canny_high = 60}};
  const auto frame = [&](Engine& e) {
    e.restart();
    const ImageRgba8& image = e.render(&source);
    return image.pixels;
  };
  Engine engine(o);
  engine.configure(s, true);
  const std::vector<uint8_t> low = frame(engine);
  // A new plan is built while the old one lives: its ops are elsewhere in memory.
  const Op* ops = engine.plan().graph.frame.data();
  FrameSettings high = s;
  high.controlnets[0].canny_low = 700;
  high.controlnets[0].canny_high = 900;
  ASSERT_NE(canny_edges(source, 20, 60), canny_edges(source, 700, 900));
  engine.configure(high, true);
  EXPECT_EQ(engine.plan().graph.frame.data(), ops);
  EXPECT_EQ(engine.settings(), high);
  const std::vector<uint8_t> changed = frame(engine);
  EXPECT_NE(changed, low);

  Engine fresh(o);
  fresh.configure(high, true);
  EXPECT_EQ(frame(fresh), changed);

  FrameSettings from_host = s;
  from_host.controlnets[0].preprocessor = ControlPreprocessor::Image;
  fresh.configure(from_host, true);
  const std::string e = error_of([&] { fresh.step(&source); });
  EXPECT_NE(e.find("ControlNet 1 (" + dir + "/net1): no control image"), std::string::npos) << e;
  std::vector<float> control(size_t(32) * 32 * 3, 0.5f);
  EXPECT_NE(error_of([&] { fresh.set_control_image(0, std::vector<float>(10)); }).find("ControlNet 1"),
            std::string::npos);
  fresh.set_control_image(0, control);
  EXPECT_NO_THROW(fresh.step(&source));
}

// A net's scale changes with no new plan (the same ops, the scaling ops' in_scale set in place), in the frame and the
// feature cache's cached frame, and gives the frame an engine made with it gives; scale 0 gives the frame of the model
// without the net, as a GUI's off switch does (the net does not run then: ANetAtScaleZeroDoesNotRun).
TEST(ControlNetEngine, ScalesChangeWithoutANewPlan) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const EngineOptions o = tiny_sd_engine({dir + "/net1", dir + "/net2"});
  const std::vector<float> source = smooth_rows(rng);
  {  // guess mode: the scaling ops' factors are not all 1
    FrameSettings s;
    s.steps = 2;
    s.guidance = 3.0f;
    s.guess_mode = true;
    s.cache_refresh = 2;  // the cached frame's nets too: frames 1 and 3 of the sequence are cached
    s.controlnets = {{.scale = 1.5f, .preprocessor = ControlPreprocessor::Canny, .canny_low = 20, .canny_high = 60},
                     {.scale = 0.7f, .preprocessor = ControlPreprocessor::Source}};
    const auto frames = [&](Engine& e) {  // a full frame and a cached one
      e.restart();
      std::vector<std::vector<uint8_t>> out;
      for (int f = 0; f < 2; ++f) out.push_back(e.render(&source).pixels);
      return out;
    };
    Engine engine(o);
    engine.configure(s, true);
    const auto before = frames(engine);
    const Op* ops = engine.plan().graph.frame.data();  // a new plan is built while the old lives: elsewhere
    FrameSettings changed = s;
    changed.controlnets[0].scale = 0.3f;
    changed.controlnets[1].scale = 0.0f;
    engine.configure(changed, true);
    EXPECT_EQ(engine.plan().graph.frame.data(), ops);
    const auto after = frames(engine);
    EXPECT_NE(after, before);
    Engine fresh(o);
    fresh.configure(changed, true);
    EXPECT_EQ(frames(fresh), after);

    // Both off: the frames of tiny_sd without nets.
    changed.controlnets[0].scale = 0.0f;
    engine.configure(changed, true);
    EXPECT_EQ(engine.plan().graph.frame.data(), ops);
    const EngineOptions plain = tiny_sd_engine({});
    FrameSettings no_nets = s;
    no_nets.controlnets.clear();
    no_nets.guess_mode = false;
    Engine without(plain);
    without.configure(no_nets, true);
    EXPECT_EQ(frames(engine), frames(without));
  }
}

// FramePlan::controlnet_ops in both frame lists: each net's own ops (its weight prefix's, but its control image's,
// which stay on) and the U-Net's adds that read the residuals its ops wrote, each op once; no other op. The ops of a
// net at scale 0 are off, the others' on.
void expect_net_ops(FramePlan& plan, const FrameSettings& s) {
  const size_t nets = plan.controlnet_ops.size();
  for (FrameOps list : {FrameOps::Full, FrameOps::Cached}) {
    const std::vector<Op>& ops = plan.graph.frame_ops(list);
    std::vector<int> net_of(ops.size(), -1);
    for (size_t k = 0; k < nets; ++k)
      for (const FramePlan::ListOps& r : plan.controlnet_ops[k])
        for (size_t i = r.ops.begin; r.list == list && i < r.ops.end; ++i) {
          EXPECT_EQ(net_of.at(i), -1) << ops[i].layer;
          net_of[i] = int(k);
        }
    std::vector<std::set<int>> written(nets);  // per net, what its ops' last scalings wrote: its residuals
    size_t adds = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      SCOPED_TRACE(op.layer);
      const auto* scaling = std::get_if<ScaleActivationOp>(&op.body);
      if (op.layer.starts_with("down_residual.") || op.layer.starts_with("mid_residual")) {
        ASSERT_GE(net_of[i], 0);
        ASSERT_TRUE(scaling);
        EXPECT_EQ(scaling->y.id, scaling->x.id);  // in place into the skip
        EXPECT_TRUE(written[size_t(net_of[i])].contains(scaling->residual.id));
        ++adds;
      } else {
        size_t own = nets;
        for (size_t k = 0; k < nets; ++k)
          if (op.layer.starts_with(controlnet_weight_prefix(k))) own = k;
        const bool image = own < nets && (op.layer.starts_with(controlnet_weight_prefix(own) + "image") ||
                                          op.layer.starts_with(controlnet_weight_prefix(own) + "canny"));
        EXPECT_EQ(net_of[i], own < nets && !image ? int(own) : -1);
        if (scaling && own < nets && !image) written[own].insert(scaling->y.id);
      }
      if (net_of[i] >= 0) EXPECT_EQ(op.off, s.controlnets.at(size_t(net_of[i])).scale == 0.0f);
      else EXPECT_FALSE(op.off);
    }
    if (list == FrameOps::Full || s.cache_refresh > 0) EXPECT_GT(adds, 0u);
  }
}

// What each net costs is recorded whatever the frame's shape: nets that run at some steps only (the U-Net's adds
// of a step's nets then name them by their place among those that run), guess mode's padding, the cached frame, a
// stream batch.
TEST(ControlNetPlan, RecordsTheOpsEachNetCosts) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  const Model m = tiny_sd_with({dir + "/net1", dir + "/net2"});
  const auto check = [&](const FrameSettings& s) {
    FramePlan plan = build_frame_plan(m, frame_sampler(m, s, true), s, true, 32, 32, 4);
    expect_net_ops(plan, s);
  };
  FrameSettings s;
  s.steps = 2;
  s.strength = 1.0f;  // both steps run
  s.cache_refresh = 2;
  s.controlnets = {{.scale = 0.0f, .start = 0.5}, {.scale = 0.6f}};
  check(s);
  s.controlnets = {{.scale = 0.8f, .end = 0.5}, {.scale = 0.0f}};
  s.guess_mode = true;
  check(s);
  s.cache_refresh = 0;
  s.strength = 0.5f;  // one step of two: a stream batch of 1-step frames
  s.controlnets = {{.scale = 0.0f}, {.scale = 0.6f}};
  s.stream_batch = 2;
  check(s);
}

// A net at scale 0 does not run: its ops and the U-Net's adds of its residuals are off (FramePlan::controlnet_ops),
// in the frame and the cached frame, from a new plan or switched live (the GUI's off switch). Its control image is
// NaN, so that a net that ran, or a residual that was added even times 0, would show: the frames are those of the
// model without the net, to the bit, and none of its ops took time. At a scale again, live, it runs: on the NaN
// image the frame is not finite, on an image the frames are those of an engine made at that scale.
TEST(ControlNetEngine, ANetAtScaleZeroDoesNotRun) {
  const std::string dir = test::tiny_controlnet_dir();
  if (dir.empty()) return;
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const std::vector<float> source = smooth_rows(rng), control = smooth_rows(rng);
  const std::vector<float> nan(control.size(), std::numeric_limits<float>::quiet_NaN());
  FrameSettings s;
  s.steps = 2;
  s.guidance = 3.0f;
  s.guess_mode = true;  // the nets' padding of their residuals too
  s.cache_refresh = 2;  // a full frame, then a cached one
  s.controlnets = {{.scale = 0.0f}, {.scale = 0.7f, .preprocessor = ControlPreprocessor::Source}};
  const auto frames = [&](Engine& e) {  // the blend history after each
    e.restart();
    std::vector<std::vector<float>> out;
    for (int f = 0; f < 2; ++f) {
      e.render(&source);
      std::vector<float>& history = out.emplace_back(size_t(32) * 32 * 3);
      e.backend().read(e.plan().prev, history.data(), history.size());
    }
    return out;
  };
  Engine engine(tiny_sd_engine({dir + "/net1", dir + "/net2"}));
  engine.configure(s, true);
  engine.set_control_image(0, nan);
  FrameSettings second = s;
  second.controlnets.erase(second.controlnets.begin());
  Engine without(tiny_sd_engine({dir + "/net2"}));
  without.configure(second, true);
  engine.backend().set_profiling(true);
  const auto off = frames(engine);
  EXPECT_EQ(off, frames(without));
  const std::vector<float> op_ms = engine.backend().frame_op_ms();  // the full frame's
  ASSERT_EQ(op_ms.size(), engine.plan().graph.frame.size());
  for (const FramePlan::ListOps& r : engine.plan().controlnet_ops.at(0))
    for (size_t i = r.ops.begin; r.list == FrameOps::Full && i < r.ops.end; ++i) EXPECT_EQ(op_ms[i], 0.0f);
  engine.backend().set_profiling(false);

  const Op* ops = engine.plan().graph.frame.data();  // a new plan is built while the old lives: elsewhere
  FrameSettings on = s;
  on.controlnets[0].scale = 1.2f;
  engine.configure(on, true);
  EXPECT_EQ(engine.plan().graph.frame.data(), ops);
  EXPECT_THROW(frames(engine), NonFiniteFrame);
  engine.set_control_image(0, control);
  Engine fresh(tiny_sd_engine({dir + "/net1", dir + "/net2"}));
  fresh.configure(on, true);
  fresh.set_control_image(0, control);
  const auto at_scale = frames(engine);
  EXPECT_EQ(at_scale, frames(fresh));
  EXPECT_NE(at_scale, off);

  engine.set_control_image(0, nan);
  engine.configure(s, true);
  EXPECT_EQ(engine.plan().graph.frame.data(), ops);
  EXPECT_EQ(frames(engine), off);
}

}  // namespace
}  // namespace rtvd
