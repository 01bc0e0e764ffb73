"""A tiny random-weight Stable Diffusion pipeline folder, written by diffusers' own save_pretrained.

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sd.py OUT_DIR VOCAB_GZ [--expected FILE]

The layout and file names of a real SD 2.x / SD-Turbo download (model_index.json, unet/, vae/, text_encoder/,
tokenizer/, scheduler/), fp16 weights, with every size cut down so that it can be committed (tests/data/tiny_sd):
a 2-level U-Net of 32/64 channels with cross-attention of width 32 at the first level and in the mid block, a
2-layer CLIP text encoder of width 32 (the full 49408-token vocabulary, one head of 32), a 2-level VAE, CLIP's
tokenizer with SD 2.x's pad token "!", and SD-Turbo's Euler scheduler (trailing spacing). The tokenizer is
stored as published checkpoints ship it (vocab.json, merges.txt, special_tokens_map.json,
tokenizer_config.json) instead of the 3.6 MB tokenizer.json this transformers writes. --expected writes what
diffusers' StableDiffusionPipeline.encode_prompt makes of PROMPTS from the saved folder, in fp32: for each
prompt i, prompt_i (1, 77, 32), negative_i (the negative prompt's), skip1_i (with clip_skip=1).
"""
import argparse
import json
import os
import sys

import torch
from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import clip_vocab  # noqa: E402


# (prompt, negative prompt): plain, punctuation with the pad token "!", over 77 tokens, empty.
PROMPTS = [("a watercolor fox", ""), ("Hello, World!! It's 4:30 -- café?", "blurry, low quality"),
           (" ".join(["a red fox in the snow"] * 20), "ugly"), ("", "")]


def print_file_sizes(out):
    """Each file written under out with its size, and their total."""
    total = 0
    for root, _, files in sorted(os.walk(out)):
        for f in sorted(files):
            path = os.path.join(root, f)
            total += os.path.getsize(path)
            print(f"{os.path.getsize(path):>10} {os.path.relpath(path, out)}")
    print(f"{total:>10} in all")
    return total


def randomize(module, gen, only=None):
    """Every parameter (or those whose name `only` accepts) random: diffusers leaves norms at 1 and many biases
    (and LoRA's B) at 0, which would hide them from a comparison."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if only and not only(name):
                continue
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.copy_(torch.randn(p.shape, generator=gen) * fan_in ** -0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("vocab_gz")
    ap.add_argument("--expected")
    a = ap.parse_args()
    gen = torch.Generator().manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=(32, 64), layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        attention_head_dim=(1, 2), cross_attention_dim=32, norm_num_groups=8, use_linear_projection=True)
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64),
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        layers_per_block=1, norm_num_groups=8, sample_size=64)
    text = CLIPTextModel(CLIPTextConfig(vocab_size=49408, hidden_size=32, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=1, hidden_act="gelu", max_position_embeddings=77,
                                        projection_dim=32))
    for m in (unet, vae, text):
        randomize(m, gen)
    vocab, merges = clip_vocab.write_vocab_and_merges(a.vocab_gz, "/tmp/tiny_sd_tokenizer")
    tokenizer = CLIPTokenizer(vocab, merges, pad_token="!", model_max_length=77)
    scheduler = EulerDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                       timestep_spacing="trailing", prediction_type="epsilon")
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet, scheduler=scheduler,
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.to(torch.float16).save_pretrained(a.out, safe_serialization=True)
    tok_dir = os.path.join(a.out, "tokenizer")
    os.remove(os.path.join(tok_dir, "tokenizer.json"))
    clip_vocab.write_vocab_and_merges(a.vocab_gz, tok_dir)
    with open(os.path.join(tok_dir, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "!",
                   "unk_token": "<|endoftext|>"}, f, indent=2)
    if a.expected:
        from safetensors.torch import save_file
        pipe = StableDiffusionPipeline.from_pretrained(a.out, torch_dtype=torch.float32)
        out = {}
        torch.set_grad_enabled(False)
        for i, (prompt, negative) in enumerate(PROMPTS):
            cond, uncond = pipe.encode_prompt(prompt, "cpu", 1, True, negative_prompt=negative)
            out[f"prompt_{i}"], out[f"negative_{i}"] = cond, uncond
            # encode_prompt(clip_skip=1) itself fails with transformers 5 (it reaches through the .text_model that
            # transformers 5 removed): its steps, by hand.
            ids = pipe.tokenizer(prompt, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
            hidden = pipe.text_encoder(ids, output_hidden_states=True).hidden_states[-2]
            out[f"skip1_{i}"] = pipe.text_encoder.final_layer_norm(hidden)
        save_file({k: v.contiguous() for k, v in out.items()}, a.expected)
    print_file_sizes(a.out)


if __name__ == "__main__":
    main()
