"""Two tiny random-weight ControlNets for tests/data/tiny_sd's U-Net, written by diffusers' own save_pretrained,
and diffusers' outputs for them.

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_controlnet.py tests/data/tiny_sd \
        tests/data/tiny_controlnet

Runs on the CPU (no GPU needed), in a few seconds. OUT_DIR gets:
  net1/   config.json, diffusion_pytorch_model.safetensors: ControlNetModel.from_unet(TINY_SD_DIR/unet) with
          conditioning_embedding_out_channels (8, 16), fp16
  net2/   config.json, diffusion_pytorch_model.fp16.safetensors (diffusers' fp16 variant name): the same with
          (4, 12) and other random weights
Every parameter of both is random (export_tiny_sd.randomize), the zero convolutions (controlnet_down_blocks,
controlnet_mid_block, controlnet_cond_embedding.conv_out) included: at zero they would hide every error.
tiny_sd's VAE halves the image once, so each conditioning embedding halves it once too (two entries): the
control image is (2h, 2w) for (h, w) latents, as StableDiffusionControlNetPipeline gives it.

  reference.safetensors  for each case i (CASES), the fp32 inputs and diffusers' fp32 outputs of both nets
                         and of TINY_SD_DIR/unet, all loaded back from the saved files (from_pretrained,
                         .float(), on the CPU); images NHWC (rtvd's layout):
    case{i}.sample                 (batch, h, w, 4) the latents
    case{i}.timestep               (1,) the diffusers timestep, the same for the whole batch
    case{i}.encoder_hidden_states  (batch, 77, 32) the context
    case{i}.cond{k}                (batch, 2h, 2w, 3) net k's control image, in [0, 1], RGB
    case{i}.net{k}.down{j}         net k's down_block_res_samples[j] at conditioning_scale SCALES[k-1]
    case{i}.net{k}.mid             net k's mid_block_res_sample at that scale
    case{i}.output1                (batch, h, w, 4) the U-Net's output given net 1's residuals
    case{i}.output_sum             the U-Net's output given the sums of both nets' residuals (diffusers'
                                   MultiControlNetModel sums them so)
  with the metadata "cases", "downs" (residuals per net), "scale1", "scale2".

StableDiffusionControlNetPipeline / Img2Img references are not written yet.
"""
import argparse
import os
import sys

import numpy as np
import torch
from diffusers import ControlNetModel, UNet2DConditionModel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402
from export_tiny_sd import print_file_sizes, randomize  # noqa: E402

CONTEXT_LENGTH = 77
SCALES = (0.7, 0.4)  # conditioning_scale of net 1 and net 2
EMBEDDING_CHANNELS = ((8, 16), (4, 12))  # conditioning_embedding_out_channels of net 1 and net 2
# (batch, latent h, latent w, timestep): batch 1 and 2, square and not, early and late (one fractional).
CASES = [(1, 8, 8, 999.0), (2, 16, 8, 261.5)]


def nhwc(x):
    return x.permute(0, 2, 3, 1).contiguous().numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tiny_sd", help="tests/data/tiny_sd")
    ap.add_argument("out", help="tests/data/tiny_controlnet")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    gen = torch.Generator().manual_seed(29)
    unet = UNet2DConditionModel.from_pretrained(os.path.join(a.tiny_sd, "unet"), torch_dtype=torch.float32).eval()

    nets = []
    for k, channels in enumerate(EMBEDDING_CHANNELS, start=1):
        net = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=channels)
        randomize(net, gen)
        net_dir = os.path.join(a.out, f"net{k}")
        variant = "fp16" if k == 2 else None
        net.to(torch.float16).save_pretrained(net_dir, safe_serialization=True, variant=variant)
        nets.append(ControlNetModel.from_pretrained(net_dir, variant=variant).float().eval())

    downs = None
    tensors = {}
    for i, (batch, h, w, timestep) in enumerate(CASES):
        sample = torch.randn(batch, 4, h, w, generator=gen)
        context = torch.randn(batch, CONTEXT_LENGTH, unet.config.cross_attention_dim, generator=gen)
        t = torch.tensor([timestep], dtype=torch.float32)
        tensors[f"case{i}.sample"] = nhwc(sample)
        tensors[f"case{i}.timestep"] = t.numpy()
        tensors[f"case{i}.encoder_hidden_states"] = context.numpy()
        residuals = []
        for k, (net, scale) in enumerate(zip(nets, SCALES), start=1):
            cond = torch.rand(batch, 3, 2 * h, 2 * w, generator=gen)
            down, mid = net(sample, t, encoder_hidden_states=context, controlnet_cond=cond, conditioning_scale=scale,
                            return_dict=False)
            tensors[f"case{i}.cond{k}"] = nhwc(cond)
            for j, d in enumerate(down):
                tensors[f"case{i}.net{k}.down{j}"] = nhwc(d)
            tensors[f"case{i}.net{k}.mid"] = nhwc(mid)
            residuals.append((down, mid))
            downs = len(down)
        (down1, mid1), (down2, mid2) = residuals
        out1 = unet(sample, t, encoder_hidden_states=context, down_block_additional_residuals=down1,
                    mid_block_additional_residual=mid1).sample
        out_sum = unet(sample, t, encoder_hidden_states=context,
                       down_block_additional_residuals=[d1 + d2 for d1, d2 in zip(down1, down2)],
                       mid_block_additional_residual=mid1 + mid2).sample
        plain = unet(sample, t, encoder_hidden_states=context).sample
        tensors[f"case{i}.output1"] = nhwc(out1)
        tensors[f"case{i}.output_sum"] = nhwc(out_sum)
        # The residuals must move the output well beyond the test's tolerance, else the test proves nothing.
        print(f"case{i}: batch {batch}, {h}x{w}, t {timestep}: |output1| {out1.norm():.4f}, "
              f"|output1 - plain| / |plain| {(out1 - plain).norm() / plain.norm():.4f}, "
              f"|output_sum - output1| / |output1| {(out_sum - out1).norm() / out1.norm():.4f}")
    st_io.write(os.path.join(a.out, "reference.safetensors"), tensors,
                {"cases": len(CASES), "downs": downs, "scale1": SCALES[0], "scale2": SCALES[1]})
    print_file_sizes(a.out)


if __name__ == "__main__":
    main()
