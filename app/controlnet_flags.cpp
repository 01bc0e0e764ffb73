#include "app/controlnet_flags.h"

#include <filesystem>

#include "base/error.h"

namespace rtvd::cli {

namespace {

// PATH[:SCALE]: the scale after the last ':' where it reads as a number (a path may hold ':' too).
void parse_net(const std::string& value, std::string& path, float& scale) {
  const size_t colon = value.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    const std::string tail = value.substr(colon + 1);
    char* end = nullptr;
    const double v = std::strtod(tail.c_str(), &end);
    if (!tail.empty() && end == tail.c_str() + tail.size()) {
      if (!std::isfinite(v) || v < -10 || v > 10)
        fail("flag '--controlnet': expected a scale from -10 to 10 after the path, got '", tail, "'");
      path = value.substr(0, colon);
      scale = float(v);
      return;
    }
  }
  path = value;
  scale = 1.0f;
}

// --control canny | source | an image file | image:PATH | video:PATH | webcam[:N].
void parse_control(const std::string& value, ControlNetOption& net) {
  if (value == "canny") {
    net.settings.preprocessor = ControlPreprocessor::Canny;
  } else if (value == "source") {
    net.settings.preprocessor = ControlPreprocessor::Source;
  } else {
    net.settings.preprocessor = ControlPreprocessor::Image;
    const bool spec = value.starts_with("image:") || value.starts_with("video:") || value.starts_with("webcam");
    net.control = SourceSpec{SourceKind::Image, value};
    if (spec) {
      try {
        net.control = parse_source_spec(value);
      } catch (const Error& e) {  // its words, under this flag's name
        const std::string source_flag = "flag '--source'", what = e.what();
        fail("flag '--control'", what.starts_with(source_flag) ? what.substr(source_flag.size()) : ": " + what);
      }
    }
  }
}

// LOW:HIGH, cv::Canny's thresholds: integers from 0 to 1020 (the largest |dx| + |dy| of 8-bit Sobel).
void parse_canny(const std::string& value, ControlNetSettings& s) {
  const size_t colon = value.find(':');
  const auto number = [&](const std::string& text) {
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() || v < 0 || v > 1020)
      fail("flag '--canny': expected LOW:HIGH, integers from 0 to 1020, got '", value, "'");
    return int(v);
  };
  if (colon == std::string::npos) number("");
  s.canny_low = number(value.substr(0, colon));
  s.canny_high = number(value.substr(colon + 1));
}

double fraction(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !(v >= 0 && v <= 1))
    fail("flag '--", flag, "': expected a fraction of the steps from 0 to 1, got '", value, "'");
  return v;
}

}  // namespace

const std::vector<FlagSpec>& controlnet_flags() {
  using K = ValueKind;
  static const std::vector<FlagSpec> specs = {
      {"controlnet", 0, K::String, "latent models: a ControlNet (a diffusers folder or a single .safetensors file) "
       "for the model's architecture, its residuals scaled; repeatable, each followed by its own flags below",
       "", "PATH[:SCALE]", true},
      {"control", 0, K::String, "the last --controlnet's control image: Canny edges of the --source, the source "
       "itself (tile ControlNets), or an image file, video:PATH or webcam[:N] (fitted to --size as --source is)",
       "", "canny|source|FILE", true},
      {"canny", 0, K::String, "the last --controlnet's Canny thresholds (with --control canny)", "100:200",
       "LOW:HIGH", true},
      {"control-start", 0, K::String, "the last --controlnet's start, a fraction of the steps that run", "0", "F",
       true},
      {"control-end", 0, K::String, "the last --controlnet's end, a fraction of the steps that run", "1", "F", true},
      {"guess-mode", 0, K::None, "ControlNets' guess mode (as diffusers': residuals from 0.1x at the top to 1x at "
       "the mid block; with guidance only the conditional half gets them)", "", ""},
  };
  return specs;
}

void read_controlnet_flags(const Flags& flags, GenerationOptions& o, std::vector<ControlNetOption>& nets) {
  std::vector<bool> has_control, has_canny;
  for (const auto& [name, value] : flags.sequence()) {
    if (name == "controlnet") {
      std::string path;
      ControlNetOption net;
      parse_net(value, path, net.settings.scale);
      if (path.empty()) fail("flag '--controlnet': expected a path, got ''");
      o.engine.model.controlnets.push_back(path);
      nets.push_back(net);
      has_control.push_back(false);
      has_canny.push_back(false);
      continue;
    }
    if (name != "control" && name != "canny" && name != "control-start" && name != "control-end") continue;
    if (nets.empty()) fail("flag '--", name, "': applies to the --controlnet before it, and none is given");
    ControlNetOption& net = nets.back();
    if (name == "control") {
      parse_control(value, net);
      has_control.back() = true;
    } else if (name == "canny") {
      parse_canny(value, net.settings);
      has_canny.back() = true;
    } else if (name == "control-start") {
      net.settings.start = fraction(name, value);
    } else {
      net.settings.end = fraction(name, value);
    }
  }
  for (size_t k = 0; k < nets.size(); ++k) {
    const std::string& path = o.engine.model.controlnets[k];
    if (!has_control[k])
      fail("flag '--controlnet ", path, "': give its control image after it: --control canny, source or a file");
    if (has_canny[k] && nets[k].settings.preprocessor != ControlPreprocessor::Canny)
      fail("flag '--canny': for a --controlnet with --control canny (", path, " has another control)");
    // The similarity filter compares the sources alone: a control that moves on its own could change while the
    // source stands still, and the frame that should show it would be skipped.
    const std::optional<SourceSpec>& control = nets[k].control;
    if (o.frame.skip_similar > 0 && control && (control->kind == SourceKind::Video || control->kind == SourceKind::Webcam))
      fail("flag '--skip-similar': compares the --source alone, and --controlnet ", path, "'s control (a ",
           control->kind == SourceKind::Video ? "video" : "webcam", ") moves on its own: drop one of them");
    o.frame.controlnets.push_back(nets[k].settings);
  }
  o.frame.guess_mode = flags.has("guess-mode");
}

}  // namespace rtvd::cli
