// size_note: silent at the model's training size, one line naming both sizes at any other.
#include <gtest/gtest.h>

#include <string>

#include "pipeline/size_note.h"
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

}  // namespace
}  // namespace rtvd
