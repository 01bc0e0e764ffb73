// The mutator of single_file_structured_fuzzer. A single file maps only when every name is one of the
// original layout's and the few shapes the architecture is read from fit, which byte mutations almost never
// keep; this one moves the block indices in names, swaps their words for other words of the layout, moves
// tensors between components, reshapes what the inference reads (widths 768 and 1024, fused q/k/v rows),
// drops and repeats blocks, and sets the metadata keys of the prediction type and image size. Compiled
// without libFuzzer's coverage: its own branches are not the target's.
#include <string>
#include <vector>

#include "tests/fuzz/safetensors_file.h"

namespace rtvd::fuzz {
namespace {

// The words of the original layout's names (U-Net, VAE, OpenAI CLIP, OpenCLIP, ControlNet) and of diffusers'.
constexpr const char* kWords[] = {
    "input_blocks", "middle_block", "output_blocks", "in_layers", "out_layers", "emb_layers", "skip_connection", "op",
    "conv", "transformer_blocks", "attn1", "attn2", "to_q", "to_k", "to_v", "to_out", "proj_in", "proj_out", "norm",
    "norm1", "norm2", "norm3", "ff", "net", "proj", "time_embed", "out", "encoder", "decoder", "down", "up", "block",
    "block_1", "block_2", "mid", "attn_1", "q", "k", "v", "nin_shortcut", "downsample", "upsample", "quant_conv",
    "post_quant_conv", "conv_in", "conv_out", "norm_out", "text_model", "embeddings", "token_embedding",
    "position_embedding", "position_ids", "layers", "self_attn", "q_proj", "out_proj", "layer_norm1", "mlp", "fc1",
    "final_layer_norm", "resblocks", "in_proj_weight", "in_proj_bias", "ln_1", "ln_2", "c_fc", "c_proj", "ln_final",
    "positional_embedding", "text_projection", "logit_scale", "weight", "bias", "down_blocks", "resnets",
    "input_hint_block", "zero_convs", "middle_block_out", "label_emb"};
constexpr const char* kPrefixes[] = {"model.diffusion_model.", "first_stage_model.", "cond_stage_model.transformer.",
                                     "cond_stage_model.transformer.text_model.", "cond_stage_model.model.",
                                     "model_ema.", "", "cond_stage_model.", "control_model."};
constexpr const char* kBuffers[] = {"betas", "alphas_cumprod", "logvar", "v_pred", "model_ema.decay", "alphas"};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ".") + p;
  return s;
}

void rename(File& f, const std::string& old, const std::string& name) {
  if (name == old || f.header.contains(name)) return;
  ordered_json entry = f.header[old];
  f.header.erase(old);
  f.header[name] = std::move(entry);
}

// One part of a name: an index moved or set, a word swapped, a part dropped or added; or the prefix changed.
std::string mutate_name(const std::string& name, Rng& rng) {
  std::vector<std::string> parts = split(name);
  const size_t at = rng.below(parts.size());
  std::string& p = parts[at];
  const bool index = !p.empty() && p.find_first_not_of("0123456789") == std::string::npos;
  switch (rng.below(5)) {
    case 0: p = index ? std::to_string(std::max<int64_t>(0, std::stoll(p.substr(0, 6)) + rng.between(-2, 2)))
                      : std::to_string(rng.below(rng.chance(90) ? 13 : 100000)); break;
    case 1: p = rng.pick(kWords); break;
    case 2: parts.erase(parts.begin() + int64_t(at)); break;
    case 3: parts.insert(parts.begin() + int64_t(at), rng.chance(50) ? std::string(rng.pick(kWords)) : std::to_string(rng.below(4))); break;
    default: {
      for (const char* prefix : kPrefixes)
        if (*prefix && name.starts_with(prefix)) return rng.pick(kPrefixes) + name.substr(std::string(prefix).size());
      return rng.pick(kPrefixes) + name;
    }
  }
  return join(parts);
}

// A dimension of a tensor set to what the inference reads or compares: context widths, SD's channels, the
// fused q/k/v rows of a width, small and edge sizes; or a dimension added or dropped.
void reshape(File& f, Rng& rng, const std::string& name) {
  ordered_json& entry = f.header[name];
  if (!entry.is_object() || !entry.contains("shape") || !entry["shape"].is_array()) return;
  ordered_json& shape = entry["shape"];
  constexpr int64_t kSizes[] = {0, 1, 2, 3, 4, 8, 24, 32, 64, 96, 320, 768, 1024, 3072, 49408, 77};
  if (shape.empty() || rng.chance(15)) {
    if (!shape.empty() && rng.chance(50)) shape.erase(rng.below(shape.size()));
    else shape.push_back(rng.pick(kSizes) % 5);
  } else {
    shape[rng.below(shape.size())] = rng.chance(90) ? ordered_json(rng.pick(kSizes)) : edge_integer(rng);
  }
}

void set_metadata(File& f, Rng& rng) {
  constexpr const char* kKeys[] = {"modelspec.prediction_type", "modelspec.predict_key", "modelspec.architecture",
                                   "ss_v_parameterization", "modelspec.resolution", "format"};
  constexpr const char* kValues[] = {"epsilon", "v", "v_prediction", "eps", "flow", "True", "False", "true",
                                     "stable-diffusion-v2-768-v", "stable-diffusion-v1", "stable-diffusion-v2-512",
                                     "768x768", "512x512", "1024x768", "8x8", "0x0", "x", "99999999999x9", "pt", ""};
  ordered_json& m = f.header[kMetadata];
  if (!m.is_object()) m = ordered_json::object();
  m[rng.pick(kKeys)] = rng.chance(90) ? ordered_json(rng.pick(kValues)) : ordered_json(edge_string(rng));
}

void mutate_file(File& f, Rng& rng) {
  const std::vector<std::string> names = tensor_names(f);
  const std::string some = names.empty() ? std::string() : names[rng.below(names.size())];
  switch (rng.below(10)) {
    case 0:
    case 1:
    case 2: if (!names.empty()) rename(f, some, mutate_name(some, rng)); break;
    case 3:
    case 4: if (!names.empty()) reshape(f, rng, some); break;
    case 5: if (!names.empty()) f.header.erase(some); break;
    case 6: {  // every tensor under a prefix dropped (a missing component or block)
      if (names.empty()) break;
      std::vector<std::string> parts = split(some);
      parts.resize(1 + rng.below(parts.size()));
      const std::string prefix = join(parts);
      for (const std::string& n : names)
        if (n.starts_with(prefix)) f.header.erase(n);
      break;
    }
    case 7: {  // a tensor repeated under a mutated name: an extra block, layer or component
      if (names.empty()) break;
      ordered_json copy = f.header[some];
      f.header[mutate_name(some, rng)] = std::move(copy);
      break;
    }
    case 8: set_metadata(f, rng); break;
    default: put_tensor(f, rng, rng.pick(kBuffers), rng.chance(80) ? "F32" : "I64", {rng.below(3)}); break;
  }
}

}  // namespace
}  // namespace rtvd::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  std::optional<File> file = parse_file(data, size);
  if (!file || rng.chance(5)) {
    return mutate_input_bytes(data, size, max_size);
  }
  for (uint64_t n = 1 + rng.below(3); n > 0; --n) mutate_file(*file, rng);
  retile(*file, rng);  // shapes changed: the file laid out again so that the reader takes it
  std::string out = rng.chance(95) ? envelope(*file) : serialise(*file, rng, max_size);
  return emit_or_mutate_bytes(out, data, size, max_size);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                                            uint8_t* out, size_t max_size, unsigned seed) {
  using namespace rtvd::fuzz;
  Rng rng(seed);
  std::optional<File> x = parse_file(a, a_size);
  const std::optional<File> y = parse_file(b, b_size);
  if (!x || !y) return 0;
  for (const auto& [key, value] : y->header.items())  // a component of b in place of a's, or beside it
    if (key != kMetadata && rng.chance(50)) x->header[key] = value;
  retile(*x, rng);
  return emit(envelope(*x), out, max_size);
}
