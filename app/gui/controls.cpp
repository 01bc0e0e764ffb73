#include "app/gui/controls.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "app/gui/panel.h"
#include "base/error.h"
#include "app/gui/shortcuts.h"
#include "pipeline/similarity_filter.h"

namespace rtvd::gui {

void apply_command(Command c, ControlsState& s, Requests& r, int class_count) {
  switch (c) {
    case Command::Pause: s.paused = !s.paused; break;
    case Command::Step:
      s.paused = true;
      r.step = true;
      break;
    case Command::Reset: r.reset = true; break;
    case Command::Overlay: s.show_overlay = !s.show_overlay; break;
    case Command::Controls: s.show_controls = !s.show_controls; break;
    case Command::Help: s.show_help = !s.show_help; break;
    case Command::Filter: s.linear = !s.linear; break;
    case Command::PrevClass:
      if (class_count > 0) s.settings.class_id = (s.settings.class_id + class_count - 1) % class_count;
      break;
    case Command::NextClass:
      if (class_count > 0) s.settings.class_id = (s.settings.class_id + 1) % class_count;
      break;
    case Command::Record: r.record = true; break;
    case Command::Screenshot: r.screenshot = true; break;
    case Command::Quit: r.quit = true; break;
  }
}

namespace {

const ImVec4 kRed(1.0f, 0.35f, 0.3f, 1.0f);

// The labels drawn right of a widget: their widest sets the column every widget leaves free for its label.
constexpr const char* kLabels[] = {"source", "path", "/dev/video", "prompt", "negative", "travel to", "travel frames",
                                   "class",  "sampler", "seed",   "steps",  "guidance", "strength",  "blend", "stream batch",
                                   "skip similar", "feature cache", "file"};

float label_column() {
  float widest = 0;
  for (const char* label : kLabels) widest = std::max(widest, ImGui::CalcTextSize(label).x);
  return widest + ImGui::GetStyle().ItemInnerSpacing.x;
}

// A button whose label names its shortcut, running the same command as the key.
void command_button(const char* label, Command c, ControlsState& s, Requests& r, int class_count) {
  if (ImGui::Button(with_key(label, c).c_str())) apply_command(c, s, r, class_count);
}

// The next command button beside the last item where it fits in the panel, else on a line of its own.
void beside_if_it_fits(const char* label, Command c) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float width = ImGui::CalcTextSize(with_key(label, c).c_str()).x + 2 * style.FramePadding.x;
  if (ImGui::GetItemRectMax().x + style.ItemSpacing.x + width <= ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x)
    ImGui::SameLine();
}

// A hint short enough for the narrowest panel, the whole of it as the box's tooltip.
bool input_with_hint(const char* label, const char* hint, const char* tooltip, std::string* text,
                     ImGuiInputTextFlags flags = 0) {
  const bool done = ImGui::InputTextWithHint(label, hint, text, flags);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tooltip);
  return done;
}

void source_section(ControlsState& s, const ControlsInfo& info, Requests& r) {
  ImGui::TextWrapped("now: %s", info.source.c_str());
  static const char* kKinds[] = {"noise walk", "image file", "video file", "webcam"};  // in SourceKind's order
  int kind = int(s.source.kind);
  if (ImGui::Combo("source", &kind, kKinds, IM_ARRAYSIZE(kKinds))) s.source.kind = SourceKind(kind);
  if (s.source.kind == SourceKind::Image || s.source.kind == SourceKind::Video)
    input_with_hint("path", "file to open", "the image or video file; open source opens it", &s.source.path);
  if (s.source.kind == SourceKind::Webcam && ImGui::InputInt("/dev/video", &s.source.webcam))
    s.source.webcam = std::max(s.source.webcam, 0);
  if (ImGui::Button("open source")) r.open_source = true;
}

// Prompt boxes apply on Enter, not per keystroke: each new text is a text encoder run.
void prompt_section(PromptSettings& p, Requests& r) {
  constexpr ImGuiInputTextFlags kOnEnter = ImGuiInputTextFlags_EnterReturnsTrue;
  ImGui::TextDisabled("Enter applies a prompt box");
  if (input_with_hint("prompt", "what to draw", "what to draw (Enter applies)", &p.prompt, kOnEnter))
    r.apply_prompts = true;
  if (input_with_hint("negative", "what to avoid", "the negative prompt: what to avoid, guidance's unconditional half "
                      "(Enter applies)", &p.negative_prompt, kOnEnter))
    r.apply_prompts = true;
  if (input_with_hint("travel to", "a second prompt", "a second prompt to move to over the travel frames (Enter "
                      "applies)", &p.prompt_to, kOnEnter))
    r.apply_prompts = true;
  if (!p.prompt_to.empty()) {
    ImGui::SliderInt("travel frames", &p.travel_frames, 1, 1000, "%d", ImGuiSliderFlags_AlwaysClamp | ImGuiSliderFlags_Logarithmic);
    if (ImGui::IsItemDeactivatedAfterEdit()) r.apply_prompts = true;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("frames from the prompt to the second one; reset starts over");
  }
}

void generation_section(ControlsState& s, const ControlsInfo& info, Requests& r) {
  FrameSettings& f = s.settings;
  if (info.has_text_encoder) prompt_section(s.prompts, r);
  if (info.class_names && !info.class_names->empty()) {
    const auto& names = *info.class_names;
    if (ImGui::BeginCombo("class", names.at(f.class_id).c_str())) {
      for (int i = 0; i < int(names.size()); ++i)
        if (ImGui::Selectable(names[i].c_str(), i == f.class_id)) f.class_id = i;
      ImGui::EndCombo();
    }
  }
  if (info.native_sampler) {
    const std::string own = cat("the scheduler's (", info.native_sampler, ")");
    const std::string own_short = cat("default: ", info.native_sampler);
    if (ImGui::BeginCombo("sampler", f.sampler ? sampler_name(*f.sampler) : own_short.c_str())) {
      if (ImGui::Selectable(own.c_str(), !f.sampler)) f.sampler.reset();
      for (const std::string& name : sampler_names()) {
        const SamplerKind k = sampler_named(name);
        if (ImGui::Selectable(name.c_str(), f.sampler == k)) f.sampler = k;
      }
      ImGui::EndCombo();
    }
  }
  const ImU64 one = 1;
  ImGui::InputScalar("seed", ImGuiDataType_U64, &f.seed, &one);
  ImGui::SliderInt("steps", &f.steps, 1, kMaxSteps, "%d", ImGuiSliderFlags_AlwaysClamp | ImGuiSliderFlags_Logarithmic);
  ImGui::SliderFloat("guidance", &f.guidance, 0.0f, 10.0f, "%.2f", ImGuiSliderFlags_AlwaysClamp);
  ImGui::SliderFloat("strength", &f.strength, 0.0f, 1.0f, "%.2f", ImGuiSliderFlags_AlwaysClamp);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("image, video and webcam sources: how far each frame is re-noised");
  ImGui::SliderFloat("blend", &f.blend, 0.0f, 0.99f, "%.2f", ImGuiSliderFlags_AlwaysClamp);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("share of the previous frame kept: temporal smoothing");
  ImGui::SliderInt("stream batch", &f.stream_batch, 1, kMaxStreamBatch, "%d", ImGuiSliderFlags_AlwaysClamp);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("frames in flight per U-Net call (throughput mode): 1, or a multiple of the steps that run; "
                      "each frame is shown K - 1 frames late");
  bool skip_similar = f.skip_similar > 0;
  if (ImGui::Checkbox("skip similar", &skip_similar)) f.skip_similar = skip_similar ? kDefaultSkipSimilar : 0.0f;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("image, video and webcam sources: a frame whose source is nearly the last rendered one's is "
                      "not rendered (--skip-similar %g)", double(kDefaultSkipSimilar));
  ImGui::SliderInt("feature cache", &f.cache_refresh, 0, kMaxCacheRefresh, f.cache_refresh == 0 ? "off" : "every %d",
                   ImGuiSliderFlags_AlwaysClamp | ImGuiSliderFlags_Logarithmic);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("a full U-Net every N frames and where the source changed (its similarity to the last full "
                      "frame's below %g: --cache-similarity), only its top level in the frames between (faster, "
                      "approximate)", double(f.cache_similarity));
}

// Per net: on/off, its scale and, for a Canny control, its thresholds; each change is live (no new plan).
void controlnet_section(ControlsState& s, const ControlsInfo& info) {
  s.nets.resize(info.controlnets.size());
  s.settings.controlnets.resize(info.controlnets.size());
  for (size_t k = 0; k < info.controlnets.size(); ++k) {
    ControlNetSettings& c = s.settings.controlnets[k];
    NetControl& n = s.nets[k];
    ImGui::PushID(int(k));
    ImGui::Checkbox(cat("net ", k + 1).c_str(), &n.on);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: off, it does not run (the frame without it)", info.controlnets[k].c_str());
    ImGui::SliderFloat("scale", &n.scale, 0.0f, 2.0f, "%.2f", ImGuiSliderFlags_AlwaysClamp);
    if (c.preprocessor == ControlPreprocessor::Canny) {
      ImGui::SliderInt("canny low", &c.canny_low, 0, 1020, "%d", ImGuiSliderFlags_AlwaysClamp);
      ImGui::SliderInt("canny high", &c.canny_high, 0, 1020, "%d", ImGuiSliderFlags_AlwaysClamp);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("cv::Canny's thresholds on the source (--canny LOW:HIGH)");
    }
    c.scale = n.on ? n.scale : 0.0f;
    if (k < info.control_views.size() && info.control_views[k]) {  // its control image, as the net reads it
      const float w = std::min(ImGui::GetContentRegionAvail().x, 160.0f);
      ImGui::Image(info.control_views[k], ImVec2(w, w * info.view_aspect));
    }
    ImGui::PopID();
  }
}

}  // namespace

void draw_controls(const Rect& area, ControlsState& s, const ControlsInfo& info, Requests& r) {
  if (area.w <= 0) return;
  const int classes = info.class_names ? int(info.class_names->size()) : 0;
  begin_panel("Controls", area);
  ImGui::PushItemWidth(-label_column());  // every widget as wide as the panel leaves beside the widest label

  for (const Message& m : *info.messages) {
    if (m.error) ImGui::PushStyleColor(ImGuiCol_Text, kRed);
    ImGui::TextWrapped("%s", m.text.c_str());
    if (m.error) ImGui::PopStyleColor();
  }

  if (ImGui::CollapsingHeader("Source", ImGuiTreeNodeFlags_DefaultOpen)) source_section(s, info, r);
  if (ImGui::CollapsingHeader("Generation", ImGuiTreeNodeFlags_DefaultOpen)) generation_section(s, info, r);
  if (!info.controlnets.empty() && ImGui::CollapsingHeader("ControlNet", ImGuiTreeNodeFlags_DefaultOpen))
    controlnet_section(s, info);

  if (ImGui::CollapsingHeader("Playback", ImGuiTreeNodeFlags_DefaultOpen)) {
    command_button(s.paused ? "resume" : "pause", Command::Pause, s, r, classes);
    beside_if_it_fits("step", Command::Step);
    command_button("step", Command::Step, s, r, classes);
    beside_if_it_fits("reset", Command::Reset);
    command_button("reset", Command::Reset, s, r, classes);
    ImGui::Checkbox("linear filtering", &s.linear);
  }

  if (ImGui::CollapsingHeader("Recording", ImGuiTreeNodeFlags_DefaultOpen)) {
    if (!info.recording)
      input_with_hint("file", "video or dir/", "where to record: a video file (.mp4 .mkv), a directory/ or a %05d.png "
                      "pattern", &s.record_path);
    command_button(info.recording ? "stop recording" : "record", Command::Record, s, r, classes);
    command_button("screenshot", Command::Screenshot, s, r, classes);
    if (!info.recording_status.empty()) ImGui::TextWrapped("%s", info.recording_status.c_str());
  }

  command_button("keyboard shortcuts", Command::Help, s, r, classes);
  ImGui::PopItemWidth();
  ImGui::End();
}

}  // namespace rtvd::gui
