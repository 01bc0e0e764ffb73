#include "support/golden.h"

#include <cstring>

#include "base/error.h"

namespace rtvd::test {

std::vector<float> floats(const TensorView& t) {
  if (t.dtype != DType::F32) fail("golden tensor '", t.name, "': expected F32, got ", dtype_name(t.dtype));
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

GoldenCase read_golden(const SafeTensorsFile& file, const std::string& suffix) {
  auto get = [&](const std::string& name) -> const TensorView& {
    const TensorView* t = file.find(name + suffix);
    if (!t) fail(file.label(), ": no tensor '", name + suffix, "'");
    return *t;
  };
  GoldenCase g;
  const TensorView& x = get("x");
  g.batch = int(x.shape.at(0));
  g.height = int(x.shape.at(1));
  g.width = int(x.shape.at(2));
  g.x = floats(x);
  g.t = floats(get("t")).at(0);
  g.v = floats(get("v"));
  if (const TensorView* c = file.find("class_labels" + suffix)) {
    g.class_ids.resize(c->numel());
    std::memcpy(g.class_ids.data(), c->data, g.class_ids.size() * 4);
  }
  if (const TensorView* c = file.find("context" + suffix)) g.context = floats(*c);
  return g;
}

Model generated_golden_model(const std::string& dir) {
  const SafeTensorsFile golden = SafeTensorsFile::open(dir + "/golden.safetensors");
  return random_model(load_model_config(dir + "/config.json"), std::stoull(golden.metadata().at("weights_seed")), dir);
}

}  // namespace rtvd::test
