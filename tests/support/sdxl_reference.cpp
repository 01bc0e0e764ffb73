#include "support/sdxl_reference.h"

#include "base/error.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "support/golden.h"

namespace rtvd::test {

DiffusersUNet load_diffusers_unet(const std::string& dir) {
  DiffusersUNet u;
  u.config = parse_diffusers_unet_config(read_config_file(dir + "/config.json"), dir + "/config.json", DType::F16);
  u.weights = std::make_unique<WeightStore>(SafeTensorsFile::open(dir + "/diffusion_pytorch_model.safetensors"));
  return u;
}

std::vector<SdxlCase> read_sdxl_reference(const std::string& path) {
  const SafeTensorsFile file = SafeTensorsFile::open(path);
  const int cases = std::stoi(file.metadata().at("cases"));
  std::vector<SdxlCase> out;
  for (int i = 0; i < cases; ++i) {
    auto get = [&](const std::string& name) -> const TensorView& {
      const TensorView* t = file.find(cat("case", i, ".", name));
      if (!t) fail(path, ": no tensor 'case", i, ".", name, "'");
      return *t;
    };
    SdxlCase c;
    c.name = cat("case", i);
    const TensorView& x = get("sample");
    c.batch = int(x.shape.at(0));
    c.height = int(x.shape.at(1));
    c.width = int(x.shape.at(2));
    c.x = floats(x);
    c.t = floats(get("timestep")).at(0) / 1000.0f;
    c.context = floats(get("encoder_hidden_states"));
    c.text_embeds = floats(get("text_embeds"));
    c.time_ids = floats(get("time_ids"));
    c.v = floats(get("output"));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace rtvd::test
