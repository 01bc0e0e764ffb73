// What a model with a text encoder is asked to draw: the CLI's prompt flags and the GUI's prompt boxes.
#pragma once
#include <string>

namespace rtvd {

// The text conditioning, for models with a text encoder. The context of frame f moves from prompt to
// prompt_to over travel_frames frames (spherical interpolation); the negative prompt is classifier-free
// guidance's unconditional half.
struct PromptSettings {
  std::string prompt;           // --prompt
  std::string negative_prompt;  // --negative-prompt
  std::string prompt_to;        // --prompt-to; "" = no travel
  int travel_frames = 48;       // --travel-frames
  bool any() const { return !prompt.empty() || !negative_prompt.empty() || !prompt_to.empty(); }
  bool operator==(const PromptSettings&) const = default;
};

}  // namespace rtvd
