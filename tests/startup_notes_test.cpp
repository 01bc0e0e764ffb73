// The start-up notes of render and the GUI (app/common/startup_notes.h).
// size_note: silent at the model's training size, one line naming both sizes at any other.
// schedule_note: one line for an assumed (default) schedule at leading spacing and a few steps, naming the first
// timestep as make_sampler_plan computes it and the flag; silent for a checkpoint's own config, other spacings,
// more steps and LCM.
// vae_precision_note: one line naming the cause and both fixes for an SDXL model decoding with a full VAE whose
// config says force_upcast, on the GPU (fp16) only; silent for SD's VAEs (whose configs say force_upcast too),
// TAESD, an SDXL VAE that says false (an fp16-fixed one) and the CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/common/startup_notes.h"
#include "pipeline/models/model.h"
#include "pipeline/samplers/scheduler_config.h"
#include "support/sdxl_folder.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

TEST(SizeNote, SilentAtTheTrainingSizeOneLineAtAnyOther) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  const int n = 8 * rng.integer(1, 64);
  const std::string trained = std::to_string(n) + "x" + std::to_string(n);
  EXPECT_EQ(size_note(n, n, n), "");
  struct Size {
    int w, h;
  };
  for (const Size s : {Size{2 * n, 2 * n}, Size{n / 2, n / 2}, Size{n, n + 8}, Size{n + 8, n}}) {
    const std::string note = size_note(n, s.w, s.h);
    SCOPED_TRACE(note);
    EXPECT_EQ(note, "note: the model was trained at " + trained + "; at " + std::to_string(s.w) + "x" +
                        std::to_string(s.h) + " it gives poor images (leave out --size for " + trained + ")");
    EXPECT_EQ(note.find('\n'), std::string::npos);
  }
}

const std::string kFlag = " (leading): a distilled few-step model (SD-Turbo) wants --timestep-spacing trailing";

TEST(ScheduleNote, NamesTheFirstTimestepOfAnAssumedLeadingScheduleAtFewSteps) {
  const SchedulerConfig sd = default_scheduler_config(PredictionType::Epsilon);
  ASSERT_TRUE(sd.assumed);
  // Leading spacing with diffusers' steps_offset 1: t = i * (1000 / steps) + 1, the largest first.
  EXPECT_EQ(schedule_note(sd, SamplerKind::Ddim, 1),
            "note: the checkpoint brings no scheduler config, and SD's default spaces 1 step from t = 1 of 999" + kFlag);
  EXPECT_EQ(schedule_note(sd, SamplerKind::Euler, 2),
            "note: the checkpoint brings no scheduler config, and SD's default spaces 2 steps from t = 501 of 999" + kFlag);
  EXPECT_EQ(schedule_note(sd, SamplerKind::Ddim, 4),
            "note: the checkpoint brings no scheduler config, and SD's default spaces 4 steps from t = 751 of 999" + kFlag);
  EXPECT_EQ(schedule_note(sd, SamplerKind::Ddim, 5), "") << "more steps reach high noise";
  EXPECT_EQ(schedule_note(sd, SamplerKind::Lcm, 1), "") << "LCM spaces its own steps";
  EXPECT_EQ(schedule_note(sd, std::nullopt, 1), schedule_note(sd, SamplerKind::Ddim, 1)) << "PNDM's own: DDIM";
  EXPECT_EQ(schedule_note(std::nullopt, std::nullopt, 1), "") << "a pixel-space model has no schedule";

  SchedulerConfig trailing = sd;
  trailing.timestep_spacing = TimestepSpacing::Trailing;  // as --timestep-spacing trailing sets it
  EXPECT_EQ(schedule_note(trailing, SamplerKind::Euler, 1), "");
  SchedulerConfig own = sd;
  own.assumed = false;  // a config the checkpoint brings says what it was distilled for
  EXPECT_EQ(schedule_note(own, SamplerKind::Euler, 1), "");
}

TEST(VaePrecisionNote, SdxlsOwnVaeOnTheGpuOnly) {
  namespace fs = std::filesystem;
  const std::string note =
      "note: SDXL's VAE (force_upcast in its config) overflows in fp16, which the GPU runs: give an fp16-fixed SDXL "
      "VAE with --vae DIR (such as madebyollin/sdxl-vae-fp16-fix), or TAESDXL with --vae tiny";
  test::TempDir tmp{"rtvd_vae_note"};
  const std::string sdxl_dir = tmp.path("sdxl");
  test::write_random_sdxl_folder(sdxl_dir);
  const auto load = [](const std::string& path, std::optional<VaeChoice> vae) {
    ModelOptions o;
    o.path = path;
    o.vae = std::move(vae);
    return load_model(o);
  };

  const Model sdxl = load(sdxl_dir, std::nullopt);
  ASSERT_TRUE(sdxl.autoencoder->force_upcast()) << "the SDXL VAE's config says force_upcast";
  EXPECT_EQ(vae_precision_note(sdxl, true), note);
  EXPECT_EQ(vae_precision_note(sdxl, false), "") << "the CPU runs fp32";
  EXPECT_EQ(vae_precision_note(load(sdxl_dir, VaeChoice{VaeChoice::Kind::Full, ""}), true), note);

  const Model sd = load(test::test_data("tiny_sd"), std::nullopt);
  ASSERT_TRUE(sd.autoencoder->force_upcast()) << "SD's VAE config says force_upcast too";
  EXPECT_EQ(vae_precision_note(sd, true), "") << "SD 1.x/2.x's decoders stay within fp16";

  const VaeChoice taesd{VaeChoice::Kind::Folder, test::test_data("tiny_taesd")};
  EXPECT_EQ(vae_precision_note(load(sdxl_dir, taesd), true), "") << "TAESDXL";

  // An fp16-fixed SDXL VAE (madebyollin/sdxl-vae-fp16-fix): the same VAE, its config saying force_upcast false.
  const std::string fixed = tmp.path("sdxl-vae-fp16-fix");
  fs::copy(sdxl_dir + "/vae", fixed);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(fixed + "/config.json"));
  config["force_upcast"] = false;
  std::ofstream(fixed + "/config.json", std::ios::trunc) << config.dump(2);
  EXPECT_EQ(vae_precision_note(load(sdxl_dir, VaeChoice{VaeChoice::Kind::Folder, fixed}), true), "");
  // The SDXL VAE given with --vae DIR is still SDXL's own.
  EXPECT_EQ(vae_precision_note(load(sdxl_dir, VaeChoice{VaeChoice::Kind::Folder, sdxl_dir + "/vae"}), true), note);
}

}  // namespace
}  // namespace rtvd
