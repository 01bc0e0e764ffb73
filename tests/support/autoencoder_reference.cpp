#include "support/autoencoder_reference.h"

#include <cstring>

#include "base/error.h"
#include "pipeline/graph/weights.h"
#include "pipeline/models/autoencoder.h"
#include "support/test_util.h"

namespace rtvd::test {

namespace {

constexpr int kImageChannels = 3;

// An F32 (1, c, h, w) tensor of the reference file, as (1, h, w, c).
std::vector<float> nhwc(const SafeTensorsFile& f, const std::string& name, int c, int h, int w) {
  const std::vector<int64_t> shape{1, c, h, w};
  const TensorView& t = f.get(name, DType::F32, shape);
  std::vector<float> nchw(size_t(t.numel()));
  std::memcpy(nchw.data(), t.data, t.bytes);
  std::vector<float> out(nchw.size());
  for (int ch = 0; ch < c; ++ch)
    for (int i = 0; i < h * w; ++i) out[size_t(i) * c + ch] = nchw[size_t(ch) * h * w + i];
  return out;
}

}  // namespace

AutoencoderReference::AutoencoderReference(const std::string& kind)
    : dir(test_data(kind == "vae" ? "tiny_sd/vae" : "tiny_taesd")),
      config(load_autoencoder_config(dir + "/config.json")) {
  if (kind != "vae" && kind != "taesd") fail("no reference autoencoder '", kind, "'");
  const SafeTensorsFile f = SafeTensorsFile::open(test_data("tiny_sd_autoencoders.safetensors"));
  const int Z = config.latent().channels;
  const TensorView* t = f.find(kind + "_image");
  if (!t || t->shape.size() != 4) fail(f.label(), ": no (1, 3, H, W) tensor ", kind, "_image");
  height = int(t->shape[2]);
  width = int(t->shape[3]);
  image = nhwc(f, kind + "_image", kImageChannels, height, width);
  mean = nhwc(f, kind == "vae" ? "vae_mean" : "taesd_latents", Z, latent_h(), latent_w());
  latent = nhwc(f, kind + "_latent", Z, latent_h(), latent_w());
  decoded = nhwc(f, kind + "_decoded", kImageChannels, height, width);
}

SafeTensorsFile AutoencoderReference::weights() const {
  return SafeTensorsFile::open(dir + "/diffusion_pytorch_model.safetensors");
}

std::vector<float> scaled(const std::vector<float>& z, const LatentSpace& space) {
  std::vector<float> out;
  for (float v : z) out.push_back((v - space.shift_factor) * space.scaling_factor);
  return out;
}

AutoencoderOutputs run_autoencoder(Backend& backend, const AutoencoderReference& ref, const AutoencoderConfig& config,
                                   SafeTensorsFile weights, int frames) {
  WeightStore store(std::move(weights));
  const int Z = config.latent().channels, h = ref.latent_h(), w = ref.latent_w();
  Graph graph;
  const Ref image = graph.add_tensor("image", Elem::Act, {1, ref.height, ref.width, kImageChannels}, true);
  const Ref latent = graph.add_tensor("latent", Elem::Act, {1, h, w, Z}, true);
  const auto builder = make_autoencoder_builder(config, store, graph, graph.frame, int(backend.act_bytes()));
  const Ref encoded = builder->encode(image, ref.height, ref.width);
  const Ref decoded = builder->decode(latent, h, w);
  graph.tensors[encoded.id].persistent = graph.tensors[decoded.id].persistent = true;  // read after the run
  store.check_all_read();

  backend.upload_weights(store);
  backend.prepare(graph);
  backend.write(image, ref.image.data(), ref.image.size());
  const std::vector<float> sampler_latent = scaled(ref.latent, config.latent());
  backend.write(latent, sampler_latent.data(), sampler_latent.size());
  backend.run_setup();
  for (int i = 0; i < frames; ++i) backend.run_frame();
  AutoencoderOutputs out;
  out.latent = poisoned(size_t(h) * w * Z);
  out.image = poisoned(ref.decoded.size());
  backend.read(encoded, out.latent.data(), out.latent.size());
  backend.read(decoded, out.image.data(), out.image.size());
  return out;
}

}  // namespace rtvd::test
