// rtvd render's ControlNet flags (app/controlnet_flags.h) as parse_render_options reads them: each net's flags
// are those after its --controlnet, so two nets on one line keep their own; PATH[:SCALE] takes a scale only
// where the tail is a number; a flag out of place is one line naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/cli.h"
#include "base/error.h"
#include "support/test_util.h"

namespace rtvd::cli {
namespace {

using Args = std::vector<std::string>;

TEST(ControlNetFlags, EachNetKeepsTheFlagsAfterIt) {
  const RenderOptions o = parse_render_options(
      {"--controlnet", "canny_net:0.8", "--control", "canny", "--canny", "50:150", "--control-end", "0.5",
       "--controlnet", "/models/a:b/depth", "--control", "video:depth.mp4", "--control-start", "0.25",
       "--controlnet", "tile", "--control", "source", "--guess-mode"});
  ASSERT_EQ(o.engine.model.controlnets, (std::vector<std::string>{"canny_net", "/models/a:b/depth", "tile"}));
  ASSERT_EQ(o.frame.controlnets.size(), 3u);
  ASSERT_EQ(o.controlnets.size(), 3u);
  const ControlNetSettings& canny = o.frame.controlnets[0];
  EXPECT_EQ(canny.scale, 0.8f);
  EXPECT_EQ(canny.preprocessor, ControlPreprocessor::Canny);
  EXPECT_EQ(canny.canny_low, 50);
  EXPECT_EQ(canny.canny_high, 150);
  EXPECT_EQ(canny.start, 0.0);
  EXPECT_EQ(canny.end, 0.5);
  EXPECT_FALSE(o.controlnets[0].control);
  const ControlNetSettings& depth = o.frame.controlnets[1];
  EXPECT_EQ(depth.scale, 1.0f);  // "b/depth" is no number: the whole value is the path
  EXPECT_EQ(depth.preprocessor, ControlPreprocessor::Image);
  EXPECT_EQ(depth.start, 0.25);
  EXPECT_EQ(depth.end, 1.0);
  ASSERT_TRUE(o.controlnets[1].control);
  EXPECT_EQ(o.controlnets[1].control->kind, SourceKind::Video);
  EXPECT_EQ(o.controlnets[1].control->path, "depth.mp4");
  EXPECT_EQ(o.frame.controlnets[2].preprocessor, ControlPreprocessor::Source);
  EXPECT_EQ(o.frame.controlnets[2].canny_low, ControlNetSettings{}.canny_low);
  EXPECT_TRUE(o.frame.guess_mode);
  EXPECT_EQ(o.controlnets[0].settings, canny);

  // A plain file is an image; nothing given: no nets.
  const RenderOptions file = parse_render_options({"--controlnet", "n", "--control", "pose.png"});
  ASSERT_TRUE(file.controlnets.at(0).control);
  EXPECT_EQ(file.controlnets[0].control->kind, SourceKind::Image);
  EXPECT_EQ(file.controlnets[0].control->path, "pose.png");
  const RenderOptions none = parse_render_options({});
  EXPECT_TRUE(none.frame.controlnets.empty());
  EXPECT_FALSE(none.frame.guess_mode);
}

// The similarity filter compares the source: with controls made from it, or a still image, a still source means a
// still frame; a control video or webcam is refused above.
TEST(ControlNetFlags, SkipSimilarTakesControlsThatMoveWithTheSource) {
  for (const std::string control : {"canny", "source", "pose.png"}) {
    const RenderOptions o = parse_render_options(
        {"--source", "image:in.png", "--skip-similar", "0.99", "--controlnet", "n", "--control", control});
    EXPECT_FLOAT_EQ(o.frame.skip_similar, 0.99f) << control;
    EXPECT_EQ(o.controlnets.size(), 1u) << control;
  }
}

TEST(ControlNetFlags, MistakesAreOneLineNamingTheFlag) {
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"--control", "canny"}, "flag '--control': applies to the --controlnet before it"},
      {{"--canny", "1:2", "--controlnet", "n", "--control", "canny"}, "flag '--canny': applies to the --controlnet"},
      {{"--controlnet", "n"}, "flag '--controlnet n': give its control image after it"},
      {{"--controlnet", "n", "--control", "source", "--canny", "1:2"}, "flag '--canny': for a --controlnet with "
                                                                         "--control canny"},
      {{"--controlnet", "n", "--control", "canny", "--canny", "100"}, "flag '--canny': expected LOW:HIGH"},
      {{"--controlnet", "n", "--control", "canny", "--canny", "1:2000"}, "flag '--canny': expected LOW:HIGH"},
      {{"--controlnet", "n", "--control", "canny", "--control-start", "x"}, "flag '--control-start': expected a "
                                                                             "fraction"},
      {{"--controlnet", "n", "--control", "canny", "--control-end", "-0.5"}, "flag '--control-end': expected a "
                                                                             "fraction"},
      {{"--controlnet", "n:1e9", "--control", "canny"}, "flag '--controlnet': expected a scale from -10 to 10"},
      {{"--controlnet", "", "--control", "canny"}, "flag '--controlnet': expected a path"},
      {{"--controlnet", "n", "--control", "webcam:x"}, "flag '--control': expected webcam:N"},
      {{"--source", "image:in.png", "--skip-similar", "0.99", "--controlnet", "n", "--control", "video:depth.mp4"},
       "flag '--skip-similar': compares the --source alone, and --controlnet n's control (a video) moves on its own"},
      {{"--source", "webcam", "--skip-similar", "0.99", "--controlnet", "n", "--control", "webcam:1"},
       "flag '--skip-similar': compares the --source alone, and --controlnet n's control (a webcam) moves"},
  };
  for (const auto& [args, want] : cases) {
    const std::string e = test::error_of([&] { parse_render_options(args); });
    SCOPED_TRACE(want);
    EXPECT_NE(e.find(want), std::string::npos) << want << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace rtvd::cli
