// The similarity filter (--skip-similar, StreamDiffusion's idea made deterministic): a frame whose source
// image is nearly the last processed one's is not rendered; the previous output is presented again.
//
// The measure, on the device (kernels/similarity): the source x and the last processed source y, cut into
// kChunks bands of rows; each band's sums X_c = sum x^2, Y_c = sum y^2, D_c = sum (x - y)^2, and
//   similarity = 1 - kChunks * max_c D_c / (X + Y)        (1 when x == y)
// With a change spread evenly over the picture this is 1 - D / (X + Y) = 2 <x, y> / (|x|^2 + |y|^2): the
// cosine similarity times 2 |x| |y| / (|x|^2 + |y|^2), at most the cosine, and below 1 for a fade (x -> a x,
// whose cosine is 1). A change in one place weighs as if it were everywhere: the worst band decides, so a
// small object that moves is not lost in a large still picture (see kDefaultSkipSimilar's numbers).
//
// The comparison is always with the last *processed* source, never the last one seen: a slow drift adds up
// frame after frame until a frame is rendered.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/backends/backend.h"
#include "pipeline/frame_plan.h"

namespace rtvd {

// The default threshold (the GUI's, and the one README suggests), from measurements on a 512x512 picture
// (docs/gui.png), values in [-1, 1]:
// - H.264 (libx264, crf 18 and 23) of the still picture with temporal grain (ffmpeg noise=alls=3..4:allf=t),
//   consecutive decoded frames (rms difference 0.5 to 0.9 of 255 levels): 0.99993 to 0.99995;
// - a 32x32 patch moving 1 pixel: 0.9973 (a white patch) and 0.992 (a patch of the picture); 2 pixels:
//   0.9945 and 0.982.
// 0.999 lies between, with margin both ways. The cosine of the whole picture cannot tell these apart: it is
// 0.99995 to 0.99999 for the grain, and 0.99983 (1 pixel) to 0.99932 (4 pixels) for the white patch.
constexpr float kDefaultSkipSimilar = 0.999f;
// Bands of rows the measure is taken over: a 32x32 object at 512x512 spans about 8 of them.
constexpr int kSimilarityChunks = 128;

// The measure from the similarity op's sums (chunks, 3) over count values (similarity.h).
double source_similarity(const std::vector<float>& sums, int64_t count);

// The frame's source measured against a source kept on the device: the similarity filter's (the last
// processed source) and the feature cache's (the source of the last full frame, FrameSettings::cache_similarity).
class SourceMonitor {
 public:
  // After the plan is built, before the backend prepares it, for plans with a source image: adds the kept
  // source (persistent, named `name`.kept_source), the sums, and two ops to the graph's check list (the
  // measure, then the keep). Nothing is kept yet: the caller keeps a source before it measures one.
  void add_to(FramePlan& plan, const std::string& name);
  void clear() { active_ = false; }  // not added to the current plan
  bool active() const { return active_; }
  // The source written for this frame against the kept one, now (a wait for the device).
  double similarity(Backend& backend);
  // This frame's source becomes the kept one.
  void keep(Backend& backend);

 private:
  bool active_ = false;
  size_t measure_op_ = 0;  // the measure's index in the check list; the keep's is the next
  Ref sums_;
  int64_t count_ = 0;
  int chunks_ = 0;
  std::vector<float> host_sums_;
};

class SimilarityFilter {
 public:
  // After the plan is built, before the backend prepares it. With the filter on (threshold > 0) and a
  // source image: adds its SourceMonitor. Forgets any earlier source: the next frame runs.
  void add_to(FramePlan& plan, float threshold);

  // After the frame's source is written: whether the frame is skipped. frame: the engine's frame index, which
  // advances once a frame ran to its end. may_skip: false where the frame must run whatever its source (the
  // first frame of a sequence, a new context). A frame that runs keeps its source first; it counts as the
  // last processed one only once its frame ran to its end (a cancelled frame does not).
  bool skip(Backend& backend, int64_t frame, bool may_skip);

  bool skipped() const { return skipped_; }                  // the last skip() said so
  int64_t skipped_frames() const { return skipped_frames_; }  // since the filter was made

 private:
  float threshold_ = 0;  // 0: off
  SourceMonitor last_;
  int64_t processed_ = -1;  // the frame index whose source was kept last; -1: none
  bool skipped_ = false;
  int64_t skipped_frames_ = 0;
};

}  // namespace rtvd
