// The computation as data: tensors with sizes and lifetimes, and a list of ops whose pointer operands
// are references (arena tensor or model weight) until a backend binds them to memory. Built once per
// plan (model load or settings change); the frame loop only replays bound ops.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/canny/canny.h"
#include "kernels/cast/cast.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/denoise/denoise.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/group_norm/group_norm.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/linear/linear.h"
#include "kernels/similarity/similarity.h"

namespace rtvd {

// Element type of a tensor or weight. Act = the backend's activation type (fp32 CPU, fp16 CUDA).
enum class Elem : uint8_t { Act, F32, I32, U8 };

// A pointer operand before binding: nothing, an arena tensor or a weight, plus an element offset
// (q/k/v of a fused projection are offsets into one tensor).
struct Ref {
  enum Kind : uint8_t { None, Tensor, Weight } kind = None;
  int id = -1;
  int64_t offset = 0;
  explicit operator bool() const { return kind != None; }
  Ref at(int64_t elements) const { return Ref{kind, id, offset + elements}; }
};

struct TensorInfo {
  std::string name;
  Elem elem;
  std::vector<int64_t> shape;
  bool persistent;  // lives for the whole plan (inputs, per-step conditioning, the blend history)
  int64_t numel() const;
};

#define RTVD_BIND(ref, field) f(ref, p.field)
struct ConvOp {
  Conv2dParams p;
  Ref x, w, y, residual, scale, bias, bias_act, gn_stats, gn_gamma, gn_beta;
  template <class F> void refs(F&& f) {
    RTVD_BIND(x, x); RTVD_BIND(w, weight); RTVD_BIND(y, y); RTVD_BIND(residual, residual); RTVD_BIND(scale, scale);
    RTVD_BIND(bias, bias); RTVD_BIND(bias_act, bias_act); RTVD_BIND(gn_stats, gn_stats); RTVD_BIND(gn_gamma, gn_gamma);
    RTVD_BIND(gn_beta, gn_beta);
  }
};
struct GroupNormOp {
  GroupNormParams p;
  Ref x, y, stats, gamma, beta;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); RTVD_BIND(stats, stats); RTVD_BIND(gamma, gamma); RTVD_BIND(beta, beta); }
};
struct LayerNormOp {
  LayerNormParams p;
  Ref x, y, gamma, beta;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); RTVD_BIND(gamma, gamma); RTVD_BIND(beta, beta); }
};
struct LinearOp {
  LinearParams p;
  Ref x, w, bias, bias_act, residual, y;
  template <class F> void refs(F&& f) {
    RTVD_BIND(x, x); RTVD_BIND(w, w); RTVD_BIND(bias, bias); RTVD_BIND(bias_act, bias_act); RTVD_BIND(residual, residual);
    RTVD_BIND(y, y);
  }
};
struct AttentionOp {
  AttentionParams p;
  Ref q, k, v, o;
  template <class F> void refs(F&& f) { RTVD_BIND(q, q); RTVD_BIND(k, k); RTVD_BIND(v, v); RTVD_BIND(o, o); }
};
struct GegluOp {
  GegluParams p;
  Ref x, y;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); }
};
struct SiluOp {
  SiluParams p;
  Ref x, y;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); }
};
struct Upsample2xOp {
  Upsample2xParams p;
  Ref x, y;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); }
};
struct ScaleActivationOp {
  ScaleActivationParams p;
  Ref x, y, residual;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); RTVD_BIND(residual, residual); }
};
struct ConcatOp {
  ConcatParams p;
  Ref a, b, y;
  template <class F> void refs(F&& f) { RTVD_BIND(a, a); RTVD_BIND(b, b); RTVD_BIND(y, y); }
};
struct TimestepEmbeddingOp {
  TimestepEmbeddingParams p;
  Ref timesteps, y;
  template <class F> void refs(F&& f) { RTVD_BIND(timesteps, timesteps); RTVD_BIND(y, y); }
};
struct EmbeddingOp {
  EmbeddingParams p;
  Ref table, ids, y;
  template <class F> void refs(F&& f) { RTVD_BIND(table, table); RTVD_BIND(ids, ids); RTVD_BIND(y, y); }
};
struct FilmOp {
  FilmParams p;
  Ref proj, base_scale, base_bias, scale, bias;
  template <class F> void refs(F&& f) {
    RTVD_BIND(proj, proj); RTVD_BIND(base_scale, base_scale); RTVD_BIND(base_bias, base_bias); RTVD_BIND(scale, scale); RTVD_BIND(bias, bias);
  }
};
struct CastOp {
  CastParams p;
  Ref x, y;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); }
};
struct GuidanceStepOp {
  GuidanceStepParams p;
  Ref v, x, x_out, noise, model_in;
  template <class F> void refs(F&& f) {
    RTVD_BIND(v, v); RTVD_BIND(x, x); RTVD_BIND(x_out, x_out); RTVD_BIND(noise, noise); RTVD_BIND(model_in, model_in);
  }
};
struct DenoiseBlendOp {
  DenoiseBlendParams p;
  Ref v, x, prev, rgba, nonfinite;
  template <class F> void refs(F&& f) {
    RTVD_BIND(v, v); RTVD_BIND(x, x); RTVD_BIND(prev, prev); RTVD_BIND(rgba, rgba); RTVD_BIND(nonfinite, nonfinite);
  }
};
struct SimilarityOp {
  SimilarityParams p;
  Ref x, y, sums;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(y, y); RTVD_BIND(sums, sums); }
};
struct CannyOp {
  CannyParams p;
  Ref x, thresholds, y, workspace;
  template <class F> void refs(F&& f) { RTVD_BIND(x, x); RTVD_BIND(thresholds, thresholds); RTVD_BIND(y, y); RTVD_BIND(workspace, workspace); }
};
#undef RTVD_BIND

using OpBody = std::variant<ConvOp, GroupNormOp, LayerNormOp, LinearOp, AttentionOp, GegluOp, SiluOp, Upsample2xOp,
                            ConcatOp, TimestepEmbeddingOp, EmbeddingOp, FilmOp, CastOp, GuidanceStepOp,
                            DenoiseBlendOp, ScaleActivationOp, SimilarityOp, CannyOp>;

const char* op_type_name(const OpBody& body);  // "conv2d", "attention", ... for the profiler

struct Op {
  std::string layer;  // parameter path, e.g. "down_blocks.0.resnets.1.conv1", or "sampler.step2"
  OpBody body;
  double flops = 0;   // arithmetic work, for TFLOP/s
  double bytes = 0;   // minimum memory traffic, for GB/s
  // Skipped by both backends: it writes nothing. Set in place between frames (a ControlNet at scale 0,
  // set_controlnet_scale in frame_plan.h), then Backend::ops_changed().
  bool off = false;
};

// Which frame op list a frame runs (Graph::frame_ops).
enum class FrameOps : uint8_t { Full, Cached };

// [begin, end) of one of the graph's op lists.
struct OpRange {
  size_t begin = 0, end = 0;
  bool empty() const { return begin == end; }
  bool operator==(const OpRange&) const = default;
};

// Frame ops [begin, end) that may run beside the frame ops after them, up to `join`, the first op that touches
// a tensor they made (first touched in [begin, end)): a ControlNet beside the U-Net's down path, which reads
// none of its residuals. The CUDA backend runs a branch on a stream of its own inside the frame's graph; the
// planner keeps every tensor the branch touches apart from every tensor the ops in [end, join) touch. Branches
// may follow each other (two nets: the second runs beside the first too). A branch reads only what was made
// before it, and the ops beside it must not write that (the builders' inputs: the model input, the step's
// conditioning). join: set by join_branches() once the frame's ops are all there.
struct Branch {
  size_t begin = 0, end = 0, join = 0;
};

// Ops are split into the setup list (run once per plan: conditioning that depends only on the settings),
// the frame list (run every frame) and the check list (run before a frame, whose result the host reads to
// decide whether the frame runs: the similarity filter's; its tensors are persistent). With the feature cache
// (FrameSettings::cache_refresh) the frames between refreshes run cached_frame instead: the frame with each
// U-Net pass's deep blocks taken from the features the last full frame left (pipeline/cached_frame.h). Both
// frame lists share the arena and its tensors.
struct Graph {
  std::vector<TensorInfo> tensors;
  std::vector<Op> setup;
  std::vector<Op> frame;
  std::vector<Op> check;
  std::vector<Op> cached_frame;  // empty without the feature cache
  std::vector<Branch> branches;  // of the frame list, in order

  std::vector<Op>& frame_ops(FrameOps which) { return which == FrameOps::Cached ? cached_frame : frame; }

  Ref add_tensor(std::string name, Elem elem, std::vector<int64_t> shape, bool persistent = false);
};

// Sets each branch's join (Branch): the first frame op after it that touches a tensor the branch made, or the
// end of the frame when none does. Call once the frame's ops are all there.
void join_branches(Graph& g);

// ControlNet's canny preprocessor (kernels/canny): the edge maps y (n, h, w, 3) fp32 of the source images x
// (n, h, w, c) fp32, with cv::Canny's low and high from thresholds, an I32 tensor (2) that the host writes (so
// that they change between frames without a new plan). Adds the op's workspace to g.
CannyOp canny_op(Graph& g, Ref x, Ref thresholds, Ref y, int n, int h, int w, int c);

}  // namespace rtvd
