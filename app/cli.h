// The rtvd command line: a table of flags per subcommand, a parser that checks each value's kind
// (integer, number, text) as it reads it, typed getters that check ranges, and the options of the render
// and gui commands. Every mistake is one rtvd::Error line naming the flag, for main to print.
#pragma once
#include <climits>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rtvd::cli {

enum class ValueKind { None, Int, Float, String, UInt64 };

struct FlagSpec {
  std::string name;          // long name without "--", e.g. "frames"
  char short_name = 0;       // 'n' for -n; 0 for none
  ValueKind kind = ValueKind::None;
  std::string help;
  std::string default_text;  // shown as "(default ...)" in the help; "" shows none
  std::string value_name;    // placeholder in the help; "" derives one from the kind
};

// Bounds of a number flag; an open end excludes its bound (fps > 0, blend < 1).
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;
};

// The flags given on one command line, by long name; values are already checked against their kind.
class Flags {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  // Each returns fallback when the flag was not given, else its value, or throws naming the flag when
  // the value is out of range.
  int get_int(const std::string& name, int fallback, int min = INT_MIN, int max = INT_MAX) const;
  uint64_t get_uint64(const std::string& name, uint64_t fallback) const;
  double get_float(const std::string& name, double fallback, const Range& range = {}) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  std::string get_choice(const std::string& name, const std::string& fallback,
                         const std::vector<std::string>& choices) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend Flags parse_flags(const std::string&, const std::vector<FlagSpec>&, const std::vector<std::string>&);
  std::map<std::string, std::string> values_;  // "" for flags without a value
  std::vector<std::string> positional_;
};

// args: what follows the subcommand. Accepts --name value, --name=value, -n value; a later repeat of a
// flag wins. command names the subcommand in errors ("render": "... for 'rtvd render' ...").
Flags parse_flags(const std::string& command, const std::vector<FlagSpec>& specs,
                  const std::vector<std::string>& args);

// The flag table as aligned help lines, one per flag.
std::string flags_help(const std::vector<FlagSpec>& specs);

struct FrameSize {
  int width = 0, height = 0;
};

constexpr int kDefaultFrames = 48;

// What to generate and where the model runs: the flags of every command that drives the engine.
struct GenerationOptions {
  std::optional<FrameSize> size;  // not given: the model's sample_size
  uint64_t seed = 0;
  int steps = 4;
  double guidance = 3.0;
  double strength = 0.6;
  double blend = 0.5;
  std::string class_name;          // a name or an id; "" = the model's first class
  std::string source = "noise";    // a source spec (pipeline/source.h), checked when opened
  std::string model_dir;           // "" = the embedded default model
  std::string device = "auto";     // auto | cpu | cuda
  int threads = 0;                 // 0 = all cores
  std::string kernels = "auto";    // auto | custom | cudnn
};

struct RenderOptions : GenerationOptions {
  std::string output = "out/rtvd.mp4";
  std::optional<int> frames;     // not given: kDefaultFrames, or a video source's length
  double fps = 24.0;
  std::string profile_path;        // "" = no profile
  bool quiet = false;
  bool help = false;  // -h given: the other values are defaults, nothing was validated
};

struct GuiOptions : GenerationOptions {
  std::optional<int> frames;       // exit after this many frames; not given: run until the window closes
  std::string screenshot;          // PNG of the window written at exit; "" = none
  std::string record;              // start recording here at launch (as render's --output); "" = not
  double fps = 24.0;               // frame rate of recordings
  double budget_ms = 40.0;         // frame-time budget drawn in the overlay
  FrameSize window{1280, 720};     // initial window size in screen coordinates
  std::string filter = "linear";   // linear | nearest: how the frame is scaled to the window
  bool vsync = true;
  bool help = false;  // -h given: the other values are defaults, nothing was validated
};

const std::vector<FlagSpec>& backend_flags();     // --device --threads --kernels: every command that runs a model
const std::vector<FlagSpec>& generation_flags();  // shared by render_flags() and gui_flags(); ends with backend_flags()
const std::vector<FlagSpec>& render_flags();
RenderOptions parse_render_options(const std::vector<std::string>& args);
const std::vector<FlagSpec>& gui_flags();
GuiOptions parse_gui_options(const std::vector<std::string>& args);

}  // namespace rtvd::cli
