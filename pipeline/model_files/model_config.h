// The architecture of a U-Net, read from config.json (docs/model-format.md). Parsing checks every key:
// an error names the file, the key and what was expected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/model_files/safetensors.h"

namespace rtvd {

class ConfigReader;

enum class NormKind { Batch, Group };

// The largest sizes config.json may give, checked when it is parsed (each error states its bound). They lie
// well beyond the SD-class U-Nets (SD 2.1: 4 levels of at most 1280 channels, 2 ResNets per level, 77
// context tokens; SDXL: 10 transformer layers) and keep every size the engine derives from them far inside
// int (8 x channels in the feed-forward, 4 x channels in the time embedding) and the graph small. Whether
// the machine can hold the model at a frame size is checked before anything is built (frame_memory()).
constexpr int kMaxFrameSide = 4096;      // sample_size, and each side of --size
constexpr int kMaxLevels = 8;            // entries of block_out_channels
constexpr int kMaxChannels = 8192;       // block_out_channels, cross_attention_dim, norm groups, heads, head dim
constexpr int kMaxImageChannels = 256;   // in_channels, out_channels
constexpr int kMaxLayersPerBlock = 8;
constexpr int kMaxTransformerLayers = 16;
constexpr int kMaxContextLength = 4096;
constexpr int kMaxClassEmbeds = 65536;
constexpr int kMaxBlocks = 256;          // ResNets and transformer blocks of the whole U-Net (SDXL: under 130)

struct ModelConfig {
  std::string name;  // shown by rtvd info and in messages: printable (base/quoted_text.h)
  DType dtype = DType::F16;  // of every tensor in weights.safetensors: F16 or F32
  int sample_size = 64;
  int in_channels = 3, out_channels = 3;
  std::vector<int> block_out_channels;
  int layers_per_block = 2;
  NormKind norm = NormKind::Batch;
  int norm_num_groups = 32;
  float norm_eps = 1e-5f;
  std::vector<bool> attention_levels;  // one per level
  bool mid_attention = true;
  int attention_head_dim = 0;   // exactly one of these two is > 0
  int num_attention_heads = 0;
  std::vector<int> transformer_layers_per_block;  // per level (the mid block: the last level's)
  int cross_attention_dim = 0;  // 0: no cross-attention
  int context_length = 0;
  bool use_linear_projection = true;
  int num_class_embeds = 0;  // classes + 1 (the last is the null class); 0 = no class conditioning
  std::vector<std::string> class_names;
  bool flip_sin_to_cos = true;
  float freq_shift = 0.0f;
  float timestep_scale = 1000.0f;
  // SDXL's added conditioning (diffusers' addition_embed_type "text_time"), 0 for none: the 6 time ids
  // (original height and width, crop top and left, target height and width) each embedded sinusoidally at
  // addition_time_embed_dim, after the pooled text embedding: add_embedding's input of
  // projection_class_embeddings_input_dim, added to the time embedding.
  int addition_time_embed_dim = 0;
  int projection_class_embeddings_input_dim = 0;
  static constexpr int kTimeIds = 6;

  int levels() const { return static_cast<int>(block_out_channels.size()); }
  int time_embed_dim() const { return 4 * block_out_channels.at(0); }
  int transformer_depth(int level) const { return transformer_layers_per_block.at(level); }
  bool text_time() const { return addition_time_embed_dim > 0; }
  // The width of the pooled text embedding that text_time models take (SDXL: 2816 - 6 x 256 = 1280).
  int text_embeds_dim() const { return projection_class_embeddings_input_dim - kTimeIds * addition_time_embed_dim; }
  int heads_for(int channels) const {
    return num_attention_heads > 0 ? num_attention_heads : channels / attention_head_dim;
  }
  int null_class() const { return num_class_embeds - 1; }
  // Multiple of this that frame sizes must be (one halving per downsampler).
  int size_multiple() const { return 1 << (levels() - 1); }
};

// The class names for a message or rtvd info: escaped, the list cut after about kExcerptBytes.
std::string class_names_text(const ModelConfig& c);

// label names the source in errors (a path, or "embedded default model").
ModelConfig parse_model_config(const std::string& json_text, const std::string& label);
ModelConfig load_model_config(const std::string& path);
// The checks that relate the fields to each other (one entry per level, sizes that divide, the graph's size),
// shared by every config format; each error names the key of r's file that has to change.
void check_model_config(const ModelConfig& c, const ConfigReader& r);

// Configs compiled into the binary (assets/<name>/config.json): "sd21", the Stable Diffusion 2.1 /
// SD-Turbo U-Net, and "sd15", the SD 1.5 U-Net.
std::vector<std::string> builtin_config_names();
ModelConfig builtin_model_config(const std::string& name);
// A built-in config by name, a model directory's config.json, or a config file.
ModelConfig find_model_config(const std::string& spec);

}  // namespace rtvd
