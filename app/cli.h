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

#include "app/common/controlnet_option.h"
#include "app/gui/gui_options.h"
#include "pipeline/engine.h"

namespace rtvd::cli {

enum class ValueKind { None, Int, Float, String, UInt64 };

struct FlagSpec {
  std::string name;          // long name without "--", e.g. "frames"
  char short_name = 0;       // 'n' for -n; 0 for none
  ValueKind kind = ValueKind::None;
  std::string help;
  std::string default_text;  // shown as "(default ...)" in the help; "" shows none
  std::string value_name;    // placeholder in the help; "" derives one from the kind
  bool repeatable = false;   // may be given more than once, each value kept (--lora); else a later one wins
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
  // Every value of a repeatable flag, in the order given (empty when not given).
  std::vector<std::string> get_all(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Every flag given, with its value, in the order given: for flags that apply to the one before them.
  const std::vector<std::pair<std::string, std::string>>& sequence() const { return sequence_; }

 private:
  friend Flags parse_flags(const std::string&, const std::vector<FlagSpec>&, const std::vector<std::string>&);
  std::map<std::string, std::string> values_;  // "" for flags without a value; the last of a repeatable flag
  std::map<std::string, std::vector<std::string>> repeated_;
  std::vector<std::string> positional_;
  std::vector<std::pair<std::string, std::string>> sequence_;
};

// args: what follows the subcommand. Accepts --name value, --name=value, -n value; a later repeat of a
// flag wins, but for repeatable flags, which keep every value. command names the subcommand in errors ("render": "... for 'rtvd render' ...").
Flags parse_flags(const std::string& command, const std::vector<FlagSpec>& specs,
                  const std::vector<std::string>& args);

// The columns help is wrapped to: the terminal's when stdout is one (at least 60), else 100.
int help_width();
// The flag table as help: each flag, then its description (and default) from one column on, wrapped to
// `width` columns with continuation lines under the description; a long flag has a line of its own.
std::string flags_help(const std::vector<FlagSpec>& specs, int width = help_width());

constexpr int kDefaultFrames = 48;
constexpr double kDefaultFps = 24.0;

struct RenderOptions : GenerationOptions {
  std::vector<ControlNetOption> controlnets;  // in order; their paths in engine.model.controlnets
  std::string output = "out/rtvd.mp4";
  std::optional<int> frames;     // not given: kDefaultFrames, or a video source's length
  std::optional<double> fps;     // not given: a video source's rate, or kDefaultFps
  std::string profile_path;        // "" = no profile
  bool quiet = false;
  bool help = false;  // -h given: the other values are defaults, nothing was validated
};

using gui::FrameSize;   // app/gui/gui_options.h: the window's options are the GUI's own
using gui::GuiOptions;

const std::vector<FlagSpec>& backend_flags();     // --device --threads --kernels: every command that runs a model
const std::vector<FlagSpec>& generation_flags();  // shared by render_flags() and gui_flags(); ends with backend_flags()
// Those of generation_flags() with these names, in this order: for the commands that take a few of them.
std::vector<FlagSpec> generation_flags(const std::vector<std::string>& names);
// The values of backend_flags() / generation_flags(); a flag that is not given, or not in the command's
// table, leaves its field as it was. Not for a command whose own flag shares a name (bench unet's --size).
void read_backend_flags(const Flags& flags, EngineOptions& o);
// --model --vae --lora --prediction-type --timestep-spacing --config
void read_model_flags(const Flags& flags, ModelOptions& o);
void read_generation_flags(const Flags& flags, GenerationOptions& o);

const std::vector<FlagSpec>& render_flags();
RenderOptions parse_render_options(const std::vector<std::string>& args);
const std::vector<FlagSpec>& gui_flags();
GuiOptions parse_gui_options(const std::vector<std::string>& args);

}  // namespace rtvd::cli
