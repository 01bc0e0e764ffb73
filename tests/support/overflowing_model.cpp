#include "support/overflowing_model.h"

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "pipeline/io/recorder.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/models/random_weights.h"
#include "support/process.h"
#include "support/test_util.h"

namespace rtvd::test {

OverflowingModel write_overflowing_model(const std::filesystem::path& dir) {
  nlohmann::json config = nlohmann::json::parse(read_file(test_data("tiny_group/config.json")));
  config["name"] = "tiny_group, RGB, with a conv_in that overflows on red (test only)";
  config["in_channels"] = config["out_channels"] = 3;
  config["attention_levels"] = {false, false};
  config["mid_attention"] = false;
  config["cross_attention_dim"] = 0;
  const std::filesystem::path model = dir / "overflowing_model";
  std::filesystem::create_directories(model);
  std::ofstream(model / "config.json") << config.dump(2);

  const ModelConfig cfg = load_model_config((model / "config.json").string());
  const SafeTensorsFile weights = random_checkpoint(cfg, 7);
  std::vector<TensorToWrite> tensors;
  for (const TensorView& t : weights.tensors()) {
    tensors.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes)});
    if (t.name != "conv_in.weight") continue;
    float* w = reinterpret_cast<float*>(tensors.back().bytes.data());  // (out, in, 3, 3) F32; channel 0 first
    for (int tap = 0; tap < 9; ++tap) w[tap] = 2.5e37f, w[9 + tap] = -2.5e37f, w[18 + tap] = 0.0f;
  }
  write_safetensors((model / "weights.safetensors").string(), tensors);

  const std::string video = (dir / "grey_red_grey.mp4").string();
  const auto filled = [](uint8_t r, uint8_t g, uint8_t b) {
    ImageRgba8 image{32, 32, {}};
    for (int px = 0; px < 32 * 32; ++px) image.pixels.insert(image.pixels.end(), {r, g, b, 255});
    return image;
  };
  const std::unique_ptr<Recorder> recorder = open_recorder(video, 32, 32, 24.0);
  const ImageRgba8 grey = filled(128, 128, 128), red = filled(255, 0, 0);
  for (const ImageRgba8* frame : {&grey, &red, &grey, &grey}) recorder->write(*frame);
  recorder->finish();
  return {model.string(), video};
}

}  // namespace rtvd::test
