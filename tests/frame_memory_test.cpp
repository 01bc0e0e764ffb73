// frame_memory's workspace: the SD VAE's mid-block attention (one head of 512 over every latent) needs its
// scores' scratch beside the activations, and the memory check counts it. On the GPU (fp16 activations) that
// is the GEMM path's chunk of scores: bounded at any size (1024²: 16,384 tokens, whose whole 16,384² scores
// would take 1.5 GiB); on the CPU the reference's block of scores.
#include <gtest/gtest.h>

#include <string>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_gemm_chunks.h"
#include "pipeline/frame_memory.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/models/model.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

// diffusers' default U-Net (SD 1.x's) and the SD (and SDXL) VAE's levels: 128/256/512/512, 8 pixels per
// latent, a mid-block attention of width 512.
Model sd_vae_model() {
  Model m;
  m.config =
      parse_diffusers_unet_config(R"({"_class_name": "UNet2DConditionModel", "sample_size": 64})", "sd", DType::F16);
  AutoencoderKLConfig kl;
  kl.block_out_channels = {128, 256, 512, 512};
  kl.layers_per_block = 2;
  m.autoencoder = AutoencoderConfig{kl};
  return m;
}

AttentionParams mid_attention(int tokens) {
  AttentionParams p;
  p.batch = p.heads = 1;
  p.head_dim = 512;
  p.q_len = p.kv_len = tokens;
  return p;
}

TEST(FrameMemory, CountsTheVaeAttentionScoresOnTheGpuAt1024) {
  const Model m = sd_vae_model();
  const FrameMemory gpu = frame_memory(m, 1024, 1024, 1, 1, 2);
  const int64_t tokens = 128 * 128, chunk_rows = attention_gemm_chunks(mid_attention(int(tokens))).rows;
  // One chunk's S (fp32) and P (fp16) and cuBLASLt's scratch, within the budget; the whole image's would not.
  EXPECT_GE(gpu.workspace, chunk_rows * tokens * 6 + int64_t(kAttentionGemmCublasScratch));
  EXPECT_LE(gpu.workspace, int64_t(kAttentionGemmScoreBudget + kAttentionGemmCublasScratch + 512));
  EXPECT_LT(gpu.workspace, tokens * tokens * 6);
  EXPECT_EQ(gpu.total(), gpu.weights + gpu.activations + gpu.workspace);
  EXPECT_NE(gpu.describe().find(", workspace "), std::string::npos) << gpu.describe();

  const FrameMemory cpu = frame_memory(m, 1024, 1024, 1, 1, 4);
  EXPECT_EQ(cpu.workspace, int64_t(attention_cpu_workspace_bytes(mid_attention(int(tokens)))));
  EXPECT_EQ(cpu.total(), cpu.weights + cpu.activations + cpu.workspace);
}

TEST(FrameMemory, GrowsWithTheImageAndNotForTaesd) {
  const Model m = sd_vae_model();
  const int64_t at512 = frame_memory(m, 512, 512, 1, 1, 2).workspace;
  EXPECT_GE(at512, int64_t(4096) * 4096 * 6) << "512²: the whole image's scores, one chunk";
  EXPECT_LE(at512, frame_memory(m, 1024, 1024, 1, 1, 2).workspace);

  Model tiny = sd_vae_model();
  tiny.autoencoder = AutoencoderConfig{AutoencoderTinyConfig{}};
  EXPECT_EQ(frame_memory(tiny, 1024, 1024, 1, 1, 2).workspace, 0);
  Model no_attention = sd_vae_model();
  std::get<AutoencoderKLConfig>(no_attention.autoencoder->model).mid_block_attention = false;
  EXPECT_EQ(frame_memory(no_attention, 1024, 1024, 1, 1, 2).workspace, 0);
}

// SDXL's added conditioning (diffusers' text_time: add_embeds, the pooled text embedding and the embedded time
// ids, 2816 wide, and add_embedding's output, the time embedding's 1280) is counted per image of the batch, and
// add_embedding's two matrices (2816 x 1280, 1280 x 1280) with the weights; the VAE's attention workspace as SD's.
TEST(FrameMemory, CountsSdxlsAddedConditioning) {
  const Model sd = sd_vae_model();
  Model sdxl;
  sdxl.config = parse_diffusers_unet_config(R"({"_class_name": "UNet2DConditionModel", "sample_size": 128,
      "addition_embed_type": "text_time", "addition_time_embed_dim": 256,
      "projection_class_embeddings_input_dim": 2816})", "sdxl", DType::F16);
  sdxl.autoencoder = sd.autoencoder;
  ASSERT_TRUE(sdxl.sdxl());
  for (const int act_bytes : {2, 4})
    for (const int batch : {1, 2, 8}) {
      SCOPED_TRACE(testing::Message() << "batch " << batch << ", " << act_bytes << " bytes");
      const FrameMemory with = frame_memory(sdxl, 1024, 1024, batch, 1, act_bytes);
      const FrameMemory without = frame_memory(sd, 1024, 1024, batch, 1, act_bytes);
      EXPECT_EQ(with.activations - without.activations, int64_t(batch) * (2816 + 1280) * act_bytes);
      EXPECT_EQ(with.weights - without.weights, int64_t(2816 + 1280) * 1280 * act_bytes);
      EXPECT_EQ(with.workspace, without.workspace);
      EXPECT_GT(with.workspace, 0);
    }
}

}  // namespace
}  // namespace rtvd
