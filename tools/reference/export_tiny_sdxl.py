"""A tiny random-weight SDXL U-Net, written by diffusers' own save_pretrained, and diffusers' outputs for it.

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sdxl.py OUT_DIR

OUT_DIR/unet/ (config.json, diffusion_pytorch_model.safetensors, fp16) is a UNet2DConditionModel with SDXL's
structure and every size cut down so that it can be committed (tests/data/tiny_sdxl): three levels of 16/24/32
channels (DownBlock2D, then two CrossAttnDownBlock2D; the up blocks their mirror), transformer_layers_per_block
[1, 2, 2] (SDXL: [1, 2, 10]; the up blocks take it reversed), heads of dim 8 (SDXL: 64) given as diffusers'
legacy attention_head_dim head counts [2, 3, 4] (SDXL: [5, 10, 20]), linear projections, a context of width
64 (two text encoders of width 32 concatenated; SDXL: 768 + 1280) and SDXL's micro-conditioning:
addition_embed_type "text_time", addition_time_embed_dim 8 (SDXL: 256) and
projection_class_embeddings_input_dim 32 + 6 x 8 = 80 (the pooled text embedding of width 32, then the six
time ids; SDXL: 1280 + 6 x 256 = 2816). Every parameter is random (randomize), norms and biases included.

OUT_DIR/unet_reference.safetensors holds, for each case i (CASES), the fp32 inputs and diffusers' fp32
output of that U-Net loaded back from OUT_DIR/unet (from_pretrained, .float(), on the CPU):
  case{i}.sample                  (batch, h, w, 4) the latents, NHWC (rtvd's layout)
  case{i}.timestep                (1,) the diffusers timestep, the same for the whole batch
  case{i}.encoder_hidden_states   (batch, 77, 64) the context
  case{i}.text_embeds             (batch, 32) the pooled text embedding
  case{i}.time_ids                (batch, 6) original height, width, crop top, left, target height, width
  case{i}.output                  (batch, h, w, 4) UNet2DConditionModel(...).sample, NHWC
and the metadata "cases" (their count). Inputs are drawn in fp32, the precision they are stored in, so the
output is exact for what is stored.
"""
import argparse
import os
import sys

import numpy as np
import torch
from diffusers import UNet2DConditionModel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402
from export_tiny_sd import print_file_sizes  # noqa: E402

TEXT_EMBED_DIM = 32       # the second text encoder's pooled projection
ADDITION_TIME_EMBED_DIM = 8
CONTEXT_LENGTH = 77

# (batch, latent h, latent w, timestep, time_ids per batch item): batch 1 and 2, square and not, early and late
# timesteps (one fractional), SDXL's usual ids and cropped, resized ones that differ within a batch.
CASES = [
    (1, 8, 8, 999.0, [[512, 512, 0, 0, 512, 512]]),
    (2, 16, 8, 261.5, [[1024, 768, 0, 0, 1024, 512], [600, 800, 32, 48, 1024, 512]]),
    (2, 8, 8, 1.0, [[64, 64, 0, 0, 64, 64], [2048, 1536, 256, 128, 512, 512]]),
]


def randomize(module, gen):
    """Every parameter random: diffusers leaves norms at 1 and many biases at 0, which would hide them from a
    comparison."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.copy_(torch.randn(p.shape, generator=gen) * fan_in ** -0.5)


def nhwc(x):
    return x.permute(0, 2, 3, 1).contiguous().numpy()


def tiny_sdxl_unet():
    return UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, block_out_channels=(16, 24, 32), layers_per_block=2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 3, 4), transformer_layers_per_block=(1, 2, 2), cross_attention_dim=64,
        norm_num_groups=8, use_linear_projection=True, addition_embed_type="text_time",
        addition_time_embed_dim=ADDITION_TIME_EMBED_DIM,
        projection_class_embeddings_input_dim=TEXT_EMBED_DIM + 6 * ADDITION_TIME_EMBED_DIM)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    gen = torch.Generator().manual_seed(0)
    unet = tiny_sdxl_unet()
    randomize(unet, gen)
    unet_dir = os.path.join(a.out, "unet")
    unet.to(torch.float16).save_pretrained(unet_dir, safe_serialization=True)

    unet = UNet2DConditionModel.from_pretrained(unet_dir).float().eval()
    context_dim = unet.config.cross_attention_dim
    tensors = {}
    for i, (batch, h, w, timestep, time_ids) in enumerate(CASES):
        sample = torch.randn(batch, 4, h, w, generator=gen)
        context = torch.randn(batch, CONTEXT_LENGTH, context_dim, generator=gen)
        text_embeds = torch.randn(batch, TEXT_EMBED_DIM, generator=gen)
        ids = torch.tensor(time_ids, dtype=torch.float32)
        t = torch.tensor([timestep], dtype=torch.float32)
        out = unet(sample, t, encoder_hidden_states=context,
                   added_cond_kwargs={"text_embeds": text_embeds, "time_ids": ids}).sample
        tensors[f"case{i}.sample"] = nhwc(sample)
        tensors[f"case{i}.timestep"] = t.numpy()
        tensors[f"case{i}.encoder_hidden_states"] = context.numpy()
        tensors[f"case{i}.text_embeds"] = text_embeds.numpy()
        tensors[f"case{i}.time_ids"] = ids.numpy()
        tensors[f"case{i}.output"] = nhwc(out)
        print(f"case{i}: batch {batch}, {h}x{w}, t {timestep}: |output| {np.linalg.norm(tensors[f'case{i}.output']):.4f}")
    st_io.write(os.path.join(a.out, "unet_reference.safetensors"), tensors, {"cases": len(CASES)})
    print_file_sizes(a.out)


if __name__ == "__main__":
    main()
