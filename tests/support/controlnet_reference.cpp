#include "support/controlnet_reference.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_controlnet_config.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/models/controlnet.h"
#include "support/golden.h"
#include "support/test_util.h"

namespace rtvd::test {

std::string tiny_controlnet_dir() {
  return exported_dir("tiny_controlnet", {"reference.safetensors", "net1/config.json", "net2/config.json"},
                      "export_tiny_controlnet.py");
}

std::vector<ControlNetCase> read_controlnet_cases(const std::string& dir, float scales[2]) {
  const std::string path = dir + "/reference.safetensors";
  const SafeTensorsFile file = SafeTensorsFile::open(path);
  const int cases = std::stoi(file.metadata().at("cases")), downs = std::stoi(file.metadata().at("downs"));
  scales[0] = std::stof(file.metadata().at("scale1"));
  scales[1] = std::stof(file.metadata().at("scale2"));
  std::vector<ControlNetCase> out;
  for (int i = 0; i < cases; ++i) {
    auto get = [&](const std::string& name) {
      const TensorView* t = file.find(cat("case", i, ".", name));
      if (!t) fail(path, ": no tensor 'case", i, ".", name, "'");
      return floats(*t);
    };
    ControlNetCase c;
    c.name = cat("case", i);
    const TensorView* x = file.find(cat("case", i, ".sample"));
    if (!x) fail(path, ": no tensor 'case", i, ".sample'");
    c.batch = int(x->shape.at(0));
    c.height = int(x->shape.at(1));
    c.width = int(x->shape.at(2));
    c.x = floats(*x);
    c.t = get("timestep").at(0) / 1000.0f;
    c.context = get("encoder_hidden_states");
    c.cond1 = get("cond1");
    c.cond2 = get("cond2");
    for (int j = 0; j < downs; ++j) {
      c.expected.down1.push_back(get(cat("net1.down", j)));
      c.expected.down2.push_back(get(cat("net2.down", j)));
    }
    c.expected.mid1 = get("net1.mid");
    c.expected.mid2 = get("net2.mid");
    c.expected.output1 = get("output1");
    c.expected.output_sum = get("output_sum");
    out.push_back(std::move(c));
  }
  return out;
}

ControlNetOutputs run_controlnets(Backend& backend, const std::string& dir, const ControlNetCase& c,
                                  const float scales[2]) {
  const std::string unet_dir = test_data("tiny_sd/unet");
  const ModelConfig cfg = parse_diffusers_unet_config(read_config_file(unet_dir + "/config.json"),
                                                      unet_dir + "/config.json", DType::F16);
  TensorSet set(SafeTensorsFile::open(unet_dir + "/diffusion_pytorch_model.safetensors"));
  ControlNetFolder net1 = open_controlnet_folder(dir + "/net1"), net2 = open_controlnet_folder(dir + "/net2");
  set.add_all(std::move(net1.weights), "controlnet.0.");
  set.add_all(std::move(net2.weights), "controlnet.1.");
  WeightStore weights(std::move(set));

  const int n = c.batch, h = c.height, w = c.width, act = int(backend.act_bytes());
  Graph g;
  const Ref x = g.add_tensor("x", Elem::Act, {n, h, w, cfg.in_channels}, true);
  const Ref context = g.add_tensor("context", Elem::Act, {n, cfg.context_length, cfg.cross_attention_dim}, true);
  const Ref image1 = g.add_tensor("image1", Elem::Act, {n, 2 * h, 2 * w, 3}, true);
  const Ref image2 = g.add_tensor("image2", Elem::Act, {n, 2 * h, 2 * w, 3}, true);
  UNetBuilder unet(cfg, weights, g, n, act);
  ControlNetBuilder cn1(net1.config, weights, g, n, act, "controlnet.0.");
  ControlNetBuilder cn2(net2.config, weights, g, n, act, "controlnet.1.");
  const CrossContext cross = unet.cross_context(context), cross1 = cn1.cross_context(context),
                     cross2 = cn2.cross_context(context);
  const StepConditioning cond = unet.conditioning(c.t, {}, "unet"), cond1 = cn1.conditioning(c.t, {}, "net1"),
                         cond2 = cn2.conditioning(c.t, {}, "net2");
  const ControlResiduals r1 = cn1.forward(x, image1, h, w, cond1, cross1, "net1", scales[0]);
  const ControlResiduals r2 = cn2.forward(x, image2, h, w, cond2, cross2, "net2", scales[1]);
  const std::vector<ControlResiduals> both{r1, r2};
  const Ref out1 = unet.forward(x, h, w, cond, cross, "one", nullptr, {&r1, 1});
  const Ref out_sum = unet.forward(x, h, w, cond, cross, "sum", nullptr, both);
  weights.check_all_read();
  auto keep = [&](Ref r) { g.tensors.at(r.id).persistent = true; };
  for (const ControlResiduals* r : {&r1, &r2}) {
    for (Ref d : r->down) keep(d);
    keep(r->mid);
  }
  keep(out1);
  keep(out_sum);

  backend.upload_weights(weights);
  backend.prepare(g);
  backend.write(x, c.x.data(), c.x.size());
  backend.write(context, c.context.data(), c.context.size());
  backend.write(image1, c.cond1.data(), c.cond1.size());
  backend.write(image2, c.cond2.data(), c.cond2.size());
  backend.run_setup();
  backend.run_frame();
  auto read = [&](Ref r) {
    std::vector<float> v(size_t(g.tensors.at(r.id).numel()));
    backend.read(r, v.data(), v.size());
    return v;
  };
  ControlNetOutputs o;
  for (size_t j = 0; j < r1.down.size(); ++j) {
    o.down1.push_back(read(r1.down[j]));
    o.down2.push_back(read(r2.down[j]));
  }
  o.mid1 = read(r1.mid);
  o.mid2 = read(r2.mid);
  o.output1 = read(out1);
  o.output_sum = read(out_sum);
  return o;
}

void expect_near(const ControlNetOutputs& got, const ControlNetOutputs& want, double tolerance) {
  ASSERT_EQ(got.down1.size(), want.down1.size());
  for (size_t j = 0; j < want.down1.size(); ++j) {
    EXPECT_LE(rel_l2(got.down1[j], want.down1[j]), tolerance) << "net 1, down " << j;
    EXPECT_LE(rel_l2(got.down2[j], want.down2[j]), tolerance) << "net 2, down " << j;
  }
  EXPECT_LE(rel_l2(got.mid1, want.mid1), tolerance) << "net 1, mid";
  EXPECT_LE(rel_l2(got.mid2, want.mid2), tolerance) << "net 2, mid";
  EXPECT_LE(rel_l2(got.output1, want.output1), tolerance) << "U-Net with net 1";
  EXPECT_LE(rel_l2(got.output_sum, want.output_sum), tolerance) << "U-Net with both nets";
}

}  // namespace rtvd::test
