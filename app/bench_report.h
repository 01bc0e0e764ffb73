// What every rtvd benchmark reports alike: the shared flags, the JSON's file and provenance (date, driver, bundle
// commit), the ceilings and the slowest layers. Used by bench_command.cpp (frames) and bench_components.cpp
// (unet, text, kernels).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "pipeline/backends/backend.h"
#include "pipeline/backends/profiler.h"

namespace rtvd {

// A benchmark's own flags, then those of every benchmark that runs a model on a backend, --json and --help.
std::vector<cli::FlagSpec> with_backend_flags(std::vector<cli::FlagSpec> specs);
// Now as "2026-11-29T01:02:03Z".
std::string utc_now();
// doc into path, indented; an Error naming --json where it cannot be written.
void write_json(const std::string& path, const nlohmann::json& doc);
// The NVIDIA kernel module's version ("580.159.04"), or "unknown".
std::string nvidia_driver_version();
// The commit of a bundle (tools/device-bundle.sh writes .commit beside the binary), or "unknown".
std::string bundle_commit();
// The n slowest layers of a profile (ms per frame or forward, summed over steps) with the implementation the
// backend runs each with, printed under a heading and returned for the JSON.
nlohmann::json print_slowest_layers(const FrameProfile& profile, const std::vector<Op>& ops, const Backend& backend,
                                    int n, const char* per);
// " = 42% of the 760 TFLOP/s GEMM peak measured now (floor 2.04 ms)" for a forward of `flops` at `tflops`, or
// "" where the backend has no ceilings (the CPU's).
std::string against_gemm_peak(double tflops, double flops, const Ceilings& c);
// The ceilings as the JSON records them: none on the CPU, with why.
nlohmann::json ceilings_json(const Ceilings& c);
double median(std::vector<double> v);

}  // namespace rtvd
