#include "pipeline/backends/profiler.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace rtvd {

void FrameProfile::add_frame(const std::vector<Op>& ops, const std::vector<float>& op_ms) {
  if (op_ms.size() != ops.size()) fail("profile: ", op_ms.size(), " op times for ", ops.size(), " ops");
  if (frames_ == 0 || sum_ms_.size() != ops.size()) {
    *this = FrameProfile();
    sum_ms_.assign(ops.size(), 0.0);
    sum_flops_.assign(ops.size(), 0.0);
    sum_bytes_.assign(ops.size(), 0.0);
    runs_.assign(ops.size(), 0);
    for (const Op& op : ops) {
      layer_.push_back(op.layer);
      type_.push_back(op_type_name(op.body));
    }
  }
  last_ms_ = op_ms;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].off) {  // no kernel ran: what the GPU's events measured around it is their own cost
      last_ms_[i] = 0;
      continue;
    }
    sum_ms_[i] += op_ms[i];
    sum_flops_[i] += ops[i].flops;
    sum_bytes_[i] += ops[i].bytes;
    ++runs_[i];
  }
  ++frames_;
}

double FrameProfile::mean_frame_ms() const {
  double s = 0;
  for (double v : sum_ms_) s += v;
  return frames_ ? s / frames_ : 0;
}

std::vector<OpTypeRow> FrameProfile::by_type() const {
  std::map<std::string, OpTypeRow> rows;
  for (size_t i = 0; i < sum_ms_.size(); ++i) {
    if (runs_[i] == 0) continue;
    OpTypeRow& r = rows[type_[i]];
    r.type = type_[i];
    ++r.calls;
    r.ms += sum_ms_[i] / std::max(frames_, 1);
    r.flops += sum_flops_[i] / std::max(frames_, 1);
    r.bytes += sum_bytes_[i] / std::max(frames_, 1);
  }
  std::vector<OpTypeRow> out;
  for (auto& [k, r] : rows) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const OpTypeRow& a, const OpTypeRow& b) { return a.ms > b.ms; });
  return out;
}

OpTypeRow& row_named(std::vector<OpTypeRow>& rows, const std::string& name) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const OpTypeRow& r) { return r.type == name; });
  return it != rows.end() ? *it : rows.emplace_back(OpTypeRow{name});
}

std::string frame_stage(const std::string& layer) {
  const auto starts = [&](const char* p) { return layer.rfind(p, 0) == 0; };
  if (starts("encoder.") || starts("quant_conv") || layer == "image") return "encode";
  if (starts("decoder.") || starts("post_quant_conv") || starts("decoded")) return "decode";
  if (starts("sampler.")) return "sampler";
  if (starts("controlnet.")) return "ControlNet";
  return "U-Net";
}

std::vector<OpTypeRow> FrameProfile::by_stage() const {
  std::vector<OpTypeRow> out;
  for (size_t i = 0; i < sum_ms_.size(); ++i) {
    if (runs_[i] == 0) continue;
    OpTypeRow& r = row_named(out, frame_stage(layer_[i]));
    ++r.calls;
    r.ms += sum_ms_[i] / std::max(frames_, 1);
    r.flops += sum_flops_[i] / std::max(frames_, 1);
    r.bytes += sum_bytes_[i] / std::max(frames_, 1);
  }
  return out;
}

std::vector<std::pair<std::string, double>> FrameProfile::slowest_layers(int n) const {
  std::map<std::string, double> per_layer;  // steps share layer names: summed over steps
  for (size_t i = 0; i < sum_ms_.size(); ++i) per_layer[layer_[i]] += sum_ms_[i] / std::max(frames_, 1);
  std::vector<std::pair<std::string, double>> out(per_layer.begin(), per_layer.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (int(out.size()) > n) out.resize(n);
  return out;
}

std::string three_digits(double v) {
  if (!std::isfinite(v) || v == 0) return cat(v);
  const int decimals = std::max(0, 2 - int(std::floor(std::log10(std::fabs(v)))));
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  // Rounding can carry into one more digit (9.996 -> "10.00"): one decimal fewer then.
  if (decimals > 0 && std::fabs(std::strtod(text, nullptr)) >= std::pow(10.0, 3 - decimals))
    std::snprintf(text, sizeof text, "%.*f", decimals - 1, v);
  return text;
}

// Matrix ops are judged by arithmetic, the rest by memory traffic.
std::string FrameProfile::table(const Ceilings& c) const {
  const double frame = mean_frame_ms();
  std::string out = cat("per frame (mean of ", frames_, " profiled frames): ", three_digits(frame), " ms\nby stage:");
  for (const OpTypeRow& r : by_stage()) out += cat(" ", r.type, " ", three_digits(r.ms), " ms;");
  out.back() = '\n';
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %6s %10s %8s %16s %8s\n", "op", "calls", "total ms", "% frame", "achieved", "% peak");
  out += line;
  for (const OpTypeRow& r : by_type()) {
    const double s = r.ms / 1e3;
    std::string achieved = "-", peak = "-";
    if (s > 0 && r.flops > 0) {
      const double tflops = r.flops / s / 1e12;
      achieved = three_digits(tflops) + " TFLOP/s";
      if (c.gemm_tflops > 0) peak = cat(int(100 * tflops / c.gemm_tflops + 0.5));
    } else if (s > 0 && r.bytes > 0) {
      const double gbps = r.bytes / s / 1e9;
      achieved = three_digits(gbps) + " GB/s";
      if (c.copy_gbps > 0) peak = cat(int(100 * gbps / c.copy_gbps + 0.5));
    }
    std::snprintf(line, sizeof line, "%-20s %6d %10.3f %8.1f %16s %8s\n", r.type.c_str(), r.calls, r.ms,
                  frame > 0 ? 100 * r.ms / frame : 0.0, achieved.c_str(), peak.c_str());
    out += line;
  }
  if (!c.none.empty()) return out + cat("% peak: none (", c.none, ")\n");
  return out + cat("peaks measured now: ", three_digits(c.gemm_tflops), " TFLOP/s (", c.gemm_what, "), ",
                   three_digits(c.copy_gbps), " GB/s (", c.copy_what, ")\n");
}

void FrameProfile::write_chrome_trace(const std::string& path, const std::vector<Op>& ops) const {
  nlohmann::json events = nlohmann::json::array();
  double t = 0;
  for (size_t i = 0; i < last_ms_.size() && i < ops.size(); ++i) {
    const double us = last_ms_[i] * 1e3;
    events.push_back({{"name", ops[i].layer}, {"cat", op_type_name(ops[i].body)}, {"ph", "X"}, {"ts", t}, {"dur", us},
                      {"pid", 0}, {"tid", 0}, {"args", {{"flops", ops[i].flops}, {"bytes", ops[i].bytes}}}});
    t += us;
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  std::ofstream f(path);
  if (!f) fail("--profile ", path, ": cannot write: ", std::strerror(errno));
  f << doc.dump(1) << "\n";
  f.flush();
  if (!f) fail("--profile ", path, ": write failed: ", std::strerror(errno));
}

}  // namespace rtvd
