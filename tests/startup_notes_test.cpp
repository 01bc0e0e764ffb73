// The start-up notes of render and the GUI (app/common/startup_notes.h).
// size_note: silent at the model's training size, one line naming both sizes at any other.
// schedule_note: one line for an assumed (default) schedule at leading spacing and a few steps, naming the first
// timestep as make_sampler_plan computes it and the flag; silent for a checkpoint's own config, other spacings,
// more steps and LCM.
#include <gtest/gtest.h>

#include <string>

#include "app/common/startup_notes.h"
#include "pipeline/samplers/scheduler_config.h"
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

}  // namespace
}  // namespace rtvd
