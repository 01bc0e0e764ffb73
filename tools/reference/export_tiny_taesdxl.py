"""A tiny random-weight TAESDXL (diffusers' AutoencoderTiny, as madebyollin/taesdxl is one) for the tiny SDXL
pipeline of tests/data/tiny_sdxl_pipeline, and StableDiffusionXLPipeline / StableDiffusionXLImg2ImgPipeline's
outputs with it as the pipeline's vae, for rtvd's CPU tests (issue 28).

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_taesdxl.py \\
        tests/data/tiny_sdxl_pipeline/model tests/data/tiny_taesdxl

MODEL_DIR is tools/reference/export_tiny_sdxl_pipeline.py's model/ (its U-Net takes 24x32 latents of 48x64
images). OUT_DIR (tests/data/tiny_taesdxl) gets:
  taesdxl/    an AutoencoderTiny of 2 levels (so 2 image pixels per latent, as the tiny pipeline's VAE), 16
              channels, one AutoencoderTinyBlock per level; config scaling_factor 1.0 and shift_factor 0, as
              madebyollin/taesdxl's (save_pretrained, fp16; every parameter random: randomize)
  pipelines.safetensors / pipelines.json
              export_tiny_sdxl_pipeline.py's cases (the same files, the same noise recorded) for RUNS below, run in
              fp32 on the CPU with vae= the AutoencoderTiny as saved; each case says "vae": "tiny". diffusers
              hands the decoder latents / vae.config.scaling_factor (1.0) and img2img's encoder output times it:
              what rtvd's frame does with the autoencoder's LatentSpace.
tests/sdxl_pipeline_test.cpp (SdxlPipeline.TinyAutoencoderMatchesDiffusers) reads them.
"""
import argparse
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_tiny_sd import randomize  # noqa: E402  (every parameter random, norms and biases too)
from export_tiny_sdxl_pipeline import export_pipelines, finish  # noqa: E402  (the cases, their noise and outputs)

# SDXL-Turbo's 1-step txt2img and 2-step img2img at strength 0.5 (1 step runs), as the README's examples.
RUNS = [
    ("txt2img_euler_a_1step_taesdxl", "txt2img", "euler_a", 1, 0.0, 1.0, "a watercolor fox", ""),
    ("img2img_euler_a_s05_taesdxl", "img2img", "euler_a", 2, 0.0, 0.5, "a watercolor fox", ""),
]


def write_taesdxl(path, gen):
    from diffusers import AutoencoderTiny
    taesdxl = AutoencoderTiny(encoder_block_out_channels=(16, 16), decoder_block_out_channels=(16, 16),
                              num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1), latent_channels=4,
                              scaling_factor=1.0, shift_factor=0.0)
    randomize(taesdxl, gen)
    taesdxl.to(torch.float16).save_pretrained(path, safe_serialization=True)
    return AutoencoderTiny.from_pretrained(path, torch_dtype=torch.float32).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", help="tests/data/tiny_sdxl_pipeline/model")
    ap.add_argument("out", help="tests/data/tiny_taesdxl")
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.model_dir, "model_index.json")):
        sys.exit(f"{a.model_dir}/model_index.json: missing (run tools/reference/export_tiny_sdxl_pipeline.py first)")
    torch.set_grad_enabled(False)
    gen = torch.Generator().manual_seed(2028)
    taesdxl_dir = os.path.join(a.out, "taesdxl")
    if os.path.isdir(taesdxl_dir):
        shutil.rmtree(taesdxl_dir)
    os.makedirs(a.out, exist_ok=True)
    taesdxl = write_taesdxl(taesdxl_dir, gen)
    print(f"taesdxl: scaling_factor {taesdxl.config.scaling_factor}, "
          f"{sum(p.numel() for p in taesdxl.parameters())} parameters", flush=True)
    finish(a.out, export_pipelines(a.model_dir, a.out, gen, runs=RUNS, vae=taesdxl))


if __name__ == "__main__":
    main()
