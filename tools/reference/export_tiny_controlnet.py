"""Two tiny random-weight ControlNets for tests/data/tiny_sd's U-Net, written by diffusers' own save_pretrained,
and diffusers' outputs for them.

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_controlnet.py tests/data/tiny_sd \
        tests/data/tiny_controlnet
    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_controlnet.py MODEL_DIR OUT_DIR --full

--full (on the GPU machine): MODEL_DIR is a full-size random-weight SD folder (export_sd_references.py --full
--weights-only, --arch sd15 or sd-turbo); OUT_DIR gets net1/ and net2/, two full-size random ControlNets of its U-Net
(ControlNetModel.from_unet, the published conditioning embedding (16, 32, 96, 256)), and pipelines.* as below at
FULL_IMAGE_SIZE, run in fp32 on the GPU: rtvd's full-size ControlNet parity (never committed: ~1.5 GB).

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

  pipelines.safetensors / pipelines.json  StableDiffusionControlNetPipeline and
                         StableDiffusionControlNetImg2ImgPipeline runs (PIPELINE_RUNS) on TINY_SD_DIR with these
                         nets, fp32 on the CPU, as export_sd_references.py records StableDiffusionPipeline's:
                         control1, control2 (1, 3, 32, 32) the nets' control images in [0, 1], source_image the
                         img2img source (the same size, [0, 1]); per run NAME the given latents (NAME.latents,
                         txt2img) or the noise img2img draws (NAME.noise: the first draw of the run's seed; img2img
                         encodes with the latent mean, as rtvd does), NAME.final_latents and NAME.image (output_type
                         "pt", [0, 1]); all NCHW, as diffusers lays them out. pipelines.json lists each run's
                         settings: nets (1 = net1, 2 = net2), controlnet_conditioning_scale, control_guidance_start
                         and _end (one per net), guess_mode, steps, guidance, strength, prompts, seed, and the
                         scheduler's config. A run that fails is logged and left out; the model-level references
                         above are written first, from a generator of their own.
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


PIPELINE_IMAGE_SIZE = 32  # tiny_sd's VAE halves it: 16x16 latents, the nets' control images at 32x32
# (name, mode, nets, scales, starts, ends, guess_mode, steps, guidance, strength, prompt, negative): one net and
# two, scales, start/end as fractions of the steps, guidance with and without guess mode, txt2img and img2img.
PIPELINE_RUNS = [
    ("txt2img_one_g0", "txt2img", [1], [0.7], [0.0], [1.0], False, 2, 0.0, 1.0, "a watercolor fox", ""),
    ("txt2img_one_g5", "txt2img", [1], [1.0], [0.0], [1.0], False, 2, 5.0, 1.0, "a watercolor fox", "blurry"),
    ("txt2img_one_end05", "txt2img", [2], [0.8], [0.0], [0.5], False, 4, 0.0, 1.0, "a red fox in the snow", ""),
    ("txt2img_two_g3", "txt2img", [1, 2], [0.7, 0.4], [0.0, 0.5], [1.0, 1.0], False, 4, 3.0, 1.0,
     "a watercolor fox", ""),
    ("txt2img_one_guess_g3", "txt2img", [1], [1.0], [0.0], [1.0], True, 2, 3.0, 1.0, "a watercolor fox", ""),
    ("img2img_one_s05", "img2img", [1], [0.7], [0.0], [1.0], False, 4, 0.0, 0.5, "a watercolor fox", ""),
    ("img2img_two_g4", "img2img", [1, 2], [0.5, 1.0], [0.0, 0.25], [0.75, 1.0], False, 4, 4.0, 0.75,
     "a watercolor fox", "blurry"),
]


FULL_IMAGE_SIZE = 512


def export_pipelines(tiny_sd, nets, out, size=PIPELINE_IMAGE_SIZE, device="cpu"):
    """PIPELINE_RUNS with nets (net1, net2 as loaded back), into out/pipelines.safetensors and pipelines.json."""
    import json
    import traceback
    from diffusers import (StableDiffusionControlNetImg2ImgPipeline, StableDiffusionControlNetPipeline,
                           StableDiffusionPipeline)
    import diffusers.pipelines.controlnet.pipeline_controlnet_img2img as img2img_module
    from diffusers.utils.torch_utils import randn_tensor
    # img2img encodes with the latent distribution's mean, as rtvd does (diffusers samples it by default)
    retrieve = img2img_module.retrieve_latents
    img2img_module.retrieve_latents = lambda out, generator=None, sample_mode="sample": retrieve(out, generator, "argmax")
    base = StableDiffusionPipeline.from_pretrained(tiny_sd, torch_dtype=torch.float32).to(device)
    nets = [net.to(device) for net in nets]
    gen = torch.Generator().manual_seed(2029)
    controls = [torch.rand(1, 3, size, size, generator=gen) for _ in nets]
    source = torch.rand(1, 3, size, size, generator=gen)
    tensors = {"control1": controls[0], "control2": controls[1], "source_image": source}
    latent_size = size // base.vae_scale_factor
    cases = []
    for name, mode, used, scales, starts, ends, guess, steps, guidance, strength, prompt, negative in PIPELINE_RUNS:
        try:
            cls = StableDiffusionControlNetPipeline if mode == "txt2img" else StableDiffusionControlNetImg2ImgPipeline
            one = len(used) == 1
            comps = dict(base.components)
            comps.update(controlnet=nets[used[0] - 1] if one else [nets[k - 1] for k in used],
                         requires_safety_checker=False)
            pipe = cls(**comps)
            pipe.set_progress_bar_config(disable=True)
            images = controls[used[0] - 1] if one else [controls[k - 1] for k in used]
            kw = dict(prompt=prompt, negative_prompt=negative or None, num_inference_steps=steps,
                      guidance_scale=guidance, guess_mode=guess,
                      controlnet_conditioning_scale=scales[0] if one else scales,
                      control_guidance_start=starts[0] if one else starts,
                      control_guidance_end=ends[0] if one else ends)
            seed = 3000 + len(cases)
            if mode == "txt2img":
                latents = torch.randn(1, 4, latent_size, latent_size, generator=gen)
                tensors[f"{name}.latents"] = latents
                kw.update(image=images, height=size, width=size, latents=latents)
            else:
                kw.update(image=source, control_image=images, height=size, width=size, strength=strength)
                # the noise prepare_latents draws with this generator: the first draw of the same seed and shape
                tensors[f"{name}.noise"] = randn_tensor((1, 4, latent_size, latent_size),
                                                        generator=torch.Generator().manual_seed(seed))
            with torch.no_grad():
                final = pipe(**kw, output_type="latent", generator=torch.Generator().manual_seed(seed)).images
                img = pipe(**kw, output_type="pt", generator=torch.Generator().manual_seed(seed)).images
            tensors[f"{name}.final_latents"] = final.cpu()
            tensors[f"{name}.image"] = img.cpu()
            cases.append(dict(name=name, mode=mode, nets=used, controlnet_conditioning_scale=scales,
                              control_guidance_start=starts, control_guidance_end=ends, guess_mode=guess,
                              steps=steps, guidance=guidance, strength=strength, prompt=prompt,
                              negative_prompt=negative, seed=seed,
                              scheduler={k: v for k, v in pipe.scheduler.config.items() if not k.startswith("_")}))
            print(f"pipeline {name}: image {tuple(img.shape)} mean {float(img.mean()):.4f}")
        except Exception as e:  # noqa: BLE001
            print(f"pipeline {name}: FAILED {e!r}")
            traceback.print_exc()
    st_io.write(os.path.join(out, "pipelines.safetensors"),
                {k: v.contiguous().numpy() for k, v in tensors.items()})
    with open(os.path.join(out, "pipelines.json"), "w") as f:
        json.dump({"image_size": size, "cases": cases}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tiny_sd", help="tests/data/tiny_sd (with --full: a full-size SD folder)")
    ap.add_argument("out", help="tests/data/tiny_controlnet")
    ap.add_argument("--full", action="store_true", help="full-size nets and pipelines on the GPU (see above)")
    ap.add_argument("--nets-only", action="store_true", help="with --full: the nets, no pipelines")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    gen = torch.Generator().manual_seed(29)
    unet = UNet2DConditionModel.from_pretrained(os.path.join(a.tiny_sd, "unet"), torch_dtype=torch.float32).eval()

    nets = []
    for k, channels in enumerate(EMBEDDING_CHANNELS, start=1):
        if a.full:  # the published embedding's channels
            channels = (16, 32, 96, 256)
        net = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=channels)
        randomize(net, gen)
        net_dir = os.path.join(a.out, f"net{k}")
        variant = "fp16" if k == 2 else None
        net.to(torch.float16).save_pretrained(net_dir, safe_serialization=True, variant=variant)
        nets.append(ControlNetModel.from_pretrained(net_dir, variant=variant).float().eval())
    if a.full:
        if not a.nets_only:
            export_pipelines(a.tiny_sd, nets, a.out, FULL_IMAGE_SIZE, "cuda")
        return

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
    export_pipelines(a.tiny_sd, nets, a.out)
    print_file_sizes(a.out)


if __name__ == "__main__":
    main()
