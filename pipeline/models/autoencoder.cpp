#include "pipeline/models/autoencoder.h"

#include "pipeline/models/autoencoder_kl.h"
#include "pipeline/models/autoencoder_tiny.h"

namespace rtvd {

std::unique_ptr<AutoencoderBuilder> make_autoencoder_builder(const AutoencoderConfig& cfg, WeightStore& weights,
                                                             Graph& graph, std::vector<Op>& ops, int act_bytes, int batch) {
  if (const auto* tiny = std::get_if<AutoencoderTinyConfig>(&cfg.model))
    return std::make_unique<AutoencoderTinyBuilder>(*tiny, weights, graph, ops, act_bytes, batch);
  const auto& kl = std::get<AutoencoderKLConfig>(cfg.model);
  return std::make_unique<AutoencoderKLBuilder>(kl, weights, graph, ops, act_bytes, batch);
}

std::vector<TensorSpec> autoencoder_parameters(const AutoencoderConfig& cfg, DType dtype) {
  if (const auto* tiny = std::get_if<AutoencoderTinyConfig>(&cfg.model))
    return autoencoder_tiny_parameters(*tiny, dtype);
  return autoencoder_kl_parameters(std::get<AutoencoderKLConfig>(cfg.model), dtype);
}

}  // namespace rtvd
