// One frame plan for every model (pipeline/frame_plan.h): its stages cover the graph's ops in order, each stage
// holds the ops it names, the guidance rule comes from the sampler, and the last step is fused with the blend
// exactly when there is nothing to decode (the default model), for txt2img and img2img at several settings.
#include <gtest/gtest.h>

#include "pipeline/frame_plan.h"
#include "pipeline/models/model.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

bool is_sampler_step(const Op& op) { return std::holds_alternative<GuidanceStepOp>(op.body); }
bool is_present(const Op& op) { return std::holds_alternative<DenoiseBlendOp>(op.body); }

// The stages partition graph.frame in order (encode, start, per step its models then its update, decode,
// present; a fused last update is present's op) and graph.setup is the condition stage.
void expect_stages_cover_the_frame(const FramePlan& plan) {
  const FrameStages& st = plan.stages;
  const std::vector<Op>& ops = plan.graph.frame;
  EXPECT_EQ(st.condition, (OpRange{0, plan.graph.setup.size()}));
  size_t at = 0;
  const auto next = [&](const OpRange& r, const std::string& what) {
    EXPECT_EQ(r.begin, at) << what;
    EXPECT_LE(r.begin, r.end) << what;
    at = r.end;
  };
  next(st.encode, "encode");
  next(st.start, "start");
  ASSERT_EQ(st.start.end - st.start.begin, 1u);
  EXPECT_TRUE(is_sampler_step(ops[st.start.begin]));
  ASSERT_EQ(st.steps.size(), plan.sampler.steps.size());
  for (size_t i = 0; i < st.steps.size(); ++i) {
    const DenoiseStage& step = st.steps[i];
    ASSERT_EQ(step.models.size(), 1u) << "step " << i << ": the U-Net alone";
    next(step.models[0], cat("step ", i, "'s U-Net"));
    EXPECT_FALSE(step.models[0].empty());
    for (size_t k = step.models[0].begin; k < step.models[0].end; ++k)
      EXPECT_FALSE(is_sampler_step(ops[k]) || is_present(ops[k])) << ops[k].layer;
    next(step.update, cat("step ", i, "'s update"));
    ASSERT_EQ(step.update.end - step.update.begin, 1u);
    const bool fused = i + 1 == st.steps.size() && step.update == st.present;
    EXPECT_TRUE(fused ? is_present(ops[step.update.begin]) : is_sampler_step(ops[step.update.begin])) << "step " << i;
  }
  if (st.steps.back().update == st.present) {
    EXPECT_TRUE(st.decode.empty());
  } else {
    next(st.decode, "decode");
    next(st.present, "present");
  }
  EXPECT_EQ(at, ops.size());
  ASSERT_EQ(st.present.end - st.present.begin, 1u);
  EXPECT_TRUE(is_present(ops[st.present.begin]));
}

TEST(FramePlan, DefaultModelFusesTheLastStepWithTheBlend) {
  const Model model = load_embedded_model();
  for (const bool img2img : {false, true}) {
    for (const float guidance : {0.5f, 1.0f, 3.0f}) {
      for (const int steps : {1, 4}) {
        SCOPED_TRACE(cat(img2img ? "img2img" : "txt2img", ", guidance ", guidance, ", ", steps, " steps"));
        FrameSettings s;
        s.guidance = guidance;
        s.steps = steps;
        FramePlan plan = build_frame_plan(model, frame_sampler(model, s, img2img), s, img2img, 16, 16, 4);
        expect_stages_cover_the_frame(plan);
        EXPECT_EQ(plan.batch, guidance == 1.0f ? 1 : 2);  // flow models guide at every scale but 1
        EXPECT_TRUE(plan.stages.encode.empty());
        EXPECT_EQ(plan.stages.steps.back().update, plan.stages.present);
        EXPECT_EQ(plan.graph.frame.size(), plan.stages.present.end);
        EXPECT_EQ(bool(plan.image), img2img);
        // The start mixes the source image on the device: x = s noise + (1 - s) image, the image in fp32.
        const auto& start = std::get<GuidanceStepOp>(plan.graph.frame[plan.stages.start.begin].body);
        EXPECT_FALSE(start.v);
        EXPECT_EQ(start.p.x_coef, img2img ? s.strength : 1.0f);
        if (img2img) {
          EXPECT_EQ(start.noise.id, plan.image.id);
          EXPECT_EQ(start.p.noise_coef, 1.0f - s.strength);
        } else {
          EXPECT_FALSE(start.noise);
        }
        const DenoiseBlendOp& present = plan.present_op();
        EXPECT_EQ(present.x.id, plan.sample.id);
        EXPECT_EQ(present.p.batch, plan.batch);
      }
    }
  }
}

TEST(FramePlan, SdModelDecodesBeforeTheBlend) {
  const Model model = load_model({.path = test::test_data("tiny_sd")});
  for (const SamplerKind sampler :
       {SamplerKind::Euler, SamplerKind::EulerAncestral, SamplerKind::Lcm, SamplerKind::Ddim}) {
    for (const bool img2img : {false, true}) {
      for (const float guidance : {1.0f, 3.0f}) {
        SCOPED_TRACE(cat(sampler_name(sampler), img2img ? " img2img" : " txt2img", ", guidance ", guidance));
        FrameSettings s;
        s.guidance = guidance;
        s.sampler = sampler;
        FramePlan plan = build_frame_plan(model, frame_sampler(model, s, img2img), s, img2img, 64, 64, 4);
        expect_stages_cover_the_frame(plan);
        EXPECT_EQ(plan.batch, guidance > 1.0f ? 2 : 1);  // diffusers' pipelines guide above 1 only
        EXPECT_EQ(plan.stages.encode.empty(), !img2img);
        EXPECT_FALSE(plan.stages.decode.empty());
        EXPECT_NE(plan.stages.steps.back().update, plan.stages.present);
        EXPECT_EQ(plan.latent_width, 64 / model.autoencoder->latent().pixels_per_latent);
        const DenoiseBlendOp& present = plan.present_op();
        EXPECT_FALSE(present.x);
        EXPECT_EQ(present.p.batch, 1);
        // LCM and Euler ancestral add fresh noise after every step but the last.
        const bool adds_noise = sampler == SamplerKind::Lcm || sampler == SamplerKind::EulerAncestral;
        std::vector<int> noisy;
        for (int i = 0; adds_noise && i + 1 < int(plan.sampler.steps.size()); ++i) noisy.push_back(i);
        EXPECT_EQ(plan.noise_steps, noisy);
      }
    }
  }
}

}  // namespace
}  // namespace rtvd
