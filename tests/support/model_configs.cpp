#include "support/model_configs.h"

#include <gtest/gtest.h>

namespace rtvd::test {

void expect_same_architecture(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.sample_size, b.sample_size);
  EXPECT_EQ(a.in_channels, b.in_channels);
  EXPECT_EQ(a.out_channels, b.out_channels);
  EXPECT_EQ(a.block_out_channels, b.block_out_channels);
  EXPECT_EQ(a.layers_per_block, b.layers_per_block);
  EXPECT_EQ(a.norm, b.norm);
  EXPECT_EQ(a.norm_num_groups, b.norm_num_groups);
  EXPECT_FLOAT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.attention_levels, b.attention_levels);
  EXPECT_EQ(a.mid_attention, b.mid_attention);
  EXPECT_EQ(a.attention_head_dim, b.attention_head_dim);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.transformer_layers_per_block, b.transformer_layers_per_block);
  EXPECT_EQ(a.cross_attention_dim, b.cross_attention_dim);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.use_linear_projection, b.use_linear_projection);
  EXPECT_EQ(a.num_class_embeds, b.num_class_embeds);
  EXPECT_EQ(a.class_names, b.class_names);
  EXPECT_EQ(a.flip_sin_to_cos, b.flip_sin_to_cos);
  EXPECT_FLOAT_EQ(a.freq_shift, b.freq_shift);
  EXPECT_FLOAT_EQ(a.timestep_scale, b.timestep_scale);
}

int64_t parameter_count(const std::vector<TensorSpec>& specs) {
  int64_t n = 0;
  for (const TensorSpec& s : specs) {
    int64_t e = 1;
    for (int64_t d : s.shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace rtvd::test
