// The controls panel and what it edits: a plain struct of settings the loop applies at the next frame
// (engine.configure() re-plans only when they changed), and requests for the loop to act on. Buttons and
// keyboard shortcuts go through the same apply_command().
#pragma once
#include <string>
#include <vector>

#include "app/gui/layout.h"
#include "pipeline/frame_plan.h"
#include "pipeline/io/source.h"
#include "pipeline/prompt_settings.h"

namespace rtvd::gui {

// A ControlNet's switch and scale in the panel: settings.controlnets[k].scale is its scale while on, 0 while off
// (the net does not run: the frame without it), both changes without a new plan (Engine::configure).
struct NetControl {
  bool on = true;
  float scale = 1.0f;
};

struct ControlsState {
  FrameSettings settings;  // applied at the next frame
  std::vector<NetControl> nets;  // per ControlNet of the model, settings.controlnets[k]'s
  PromptSettings prompts;  // the prompt boxes: applied on Enter (Requests::apply_prompts)
  SourceSpec source;       // opened on request
  std::string record_path;
  float budget_ms = 40.0f;
  bool paused = false;
  bool linear = true;     // linear or nearest scaling of the frame
  bool profiling = true;  // per-op timing for the overlay (costs GPU time: events between ops)
  bool show_controls = true, show_overlay = true, show_help = false;
};

// What the loop is asked to do this frame.
struct Requests {
  bool step = false;         // one frame while paused
  bool reset = false;        // start the frame sequence over
  bool open_source = false;  // open state.source
  bool apply_prompts = false;  // encode state.prompts (between frames) and use them from the next frame
  bool record = false;       // start or stop recording
  bool screenshot = false;
  bool quit = false;
};

enum class Command {
  Pause, Step, Reset, Overlay, Controls, Help, Filter, PrevClass, NextClass, Record, Screenshot, Quit
};

void apply_command(Command c, ControlsState& state, Requests& requests, int class_count);

struct Message {
  std::string text;
  bool error = true;  // red; else an event (a file written)
};

// What the panel shows besides the state.
struct ControlsInfo {
  const std::vector<std::string>* class_names = nullptr;  // empty: the model has no classes
  bool has_text_encoder = false;                          // show the prompt boxes
  const char* native_sampler = nullptr;  // latent models: the scheduler's own sampler; null: rectified flow
  std::vector<std::string> controlnets;  // each ControlNet's file, for its section; none: no section
  std::vector<void*> control_views;      // each net's control image, a texture for Dear ImGui (ControlViews)
  float view_aspect = 1.0f;              // their height over their width
  std::string source;                                     // what is open now
  bool recording = false;
  std::string recording_status;  // "out/x.mp4: 120 frames, 3 dropped"
  const std::vector<Message>* messages = nullptr;         // newest last
};

void draw_controls(const Rect& area, ControlsState& state, const ControlsInfo& info, Requests& requests);

}  // namespace rtvd::gui
