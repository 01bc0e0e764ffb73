// Per-op timing of frames: the backend measures each frame op (CUDA events recorded inside the frame's
// graph, read after the frame completed; host clocks on the CPU); the profile aggregates them per op
// type and per layer, against ceilings measured on this device in the same run, and writes a
// Chrome-trace/Perfetto JSON.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/graph/graph.h"

namespace rtvd {

// What this device reaches on a large GEMM and a large copy, measured now; or none, and why.
struct Ceilings {
  double gemm_tflops = 0;   // fp16 GEMM through cuBLASLt
  double copy_gbps = 0;     // device-to-device copy, bytes read + written
  std::string gemm_what, copy_what;
  std::string none;         // "" when measured; else why there are no ceilings to compare with
};

// v with three significant digits and no exponent ("0.0387", "14.8", "431"); a number of more digits
// before the point keeps them ("2784").
std::string three_digits(double v);

struct OpTypeRow {
  std::string type;
  int calls = 0;
  double ms = 0, flops = 0, bytes = 0;
};

// The stage of a frame an op belongs to, from its layer name: "encode" (the autoencoder's encoder and the
// image it reads), "ControlNet" (the nets, their control images and residuals), "U-Net", "sampler" (its steps),
// "decode" (the decoder, and the blend into RGBA8 after it).
std::string frame_stage(const std::string& layer);
// The row of `rows` named `name` (its type or stage), appended when there is none: rows in first-seen order.
OpTypeRow& row_named(std::vector<OpTypeRow>& rows, const std::string& name);

class FrameProfile {
 public:
  // One profiled frame: op_ms[i] is the time of graph.frame[i]. An op that is off (Op::off) did no work in it and
  // counts 0 ms, whatever op_ms says (on the GPU, the cost of its event nodes); an op off in every frame so far
  // is in no row.
  void add_frame(const std::vector<Op>& ops, const std::vector<float>& op_ms);
  int frames() const { return frames_; }
  double mean_frame_ms() const;
  std::vector<OpTypeRow> by_type() const;                            // per op type, per frame, slowest first
  std::vector<OpTypeRow> by_stage() const;  // per stage of the frame (frame_stage), per frame, in frame order
  std::vector<std::pair<std::string, double>> slowest_layers(int n) const;  // (layer, ms per frame)
  // op, calls, total ms, % of frame, TFLOP/s or GB/s, % of the ceiling (where there are ceilings)
  std::string table(const Ceilings& c) const;
  void write_chrome_trace(const std::string& path, const std::vector<Op>& ops) const;  // last frame

 private:
  int frames_ = 0;
  std::vector<double> sum_ms_;        // per op, over frames
  std::vector<double> sum_flops_, sum_bytes_;  // per op, over the frames it was on in
  std::vector<int> runs_;             // per op, the frames it was on in
  std::vector<float> last_ms_;        // last frame, for the trace
  std::vector<std::string> layer_, type_;
};

}  // namespace rtvd
