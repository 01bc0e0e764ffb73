"""SDXL's two text encoders and tokenizers, tiny and random, written by transformers' save_pretrained, and what
diffusers' StableDiffusionXLPipeline.encode_prompt makes of a few prompts with them.

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sdxl_text.py OUT_DIR VOCAB_GZ

OUT_DIR gets the text side of an SDXL diffusers folder (tests/data/tiny_sdxl, beside export_tiny_sdxl.py's unet/):
  text_encoder/    a CLIPTextModel as SDXL's CLIP ViT-L (quick_gelu; SDXL: 12 layers of 768), 3 layers of 8
  text_encoder_2/  a CLIPTextModelWithProjection as SDXL's OpenCLIP ViT-bigG (gelu; SDXL: 32 layers of 1280,
                   projection_dim 1280), 4 layers of 8, projection_dim 16
  tokenizer/, tokenizer_2/  CLIP's tokenizer from VOCAB_GZ (the full 49408-token vocabulary), padded as SDXL's
                   are: tokenizer/ with <|endoftext|>, tokenizer_2/ with "!"
Both encoders take the full vocabulary (their token embeddings are most of the 1.6 MB), heads of 8, and the
legacy special-token ids of SDXL's published configs (bos 0, eos 2, pad 1), so that transformers pools
text_encoder_2's output as it does for SDXL. Weights are fp16 (every parameter random: randomize). The
tokenizers are stored as published checkpoints ship them (vocab.json, merges.txt, special_tokens_map.json,
tokenizer_config.json) instead of the 3.6 MB tokenizer.json this transformers writes; vocab.json and
merges.txt are byte for byte those of tests/data/tiny_sd/tokenizer (clip_vocab.py), which git stores once.

OUT_DIR/text_reference.safetensors: for each case i of CASES, from the saved folders loaded back (fp32, CPU,
eager attention) into a StableDiffusionXLPipeline (no U-Net, VAE or scheduler: encode_prompt needs none),
  case{i}.input_ids, case{i}.input_ids_2         (1, 77) int32, each tokenizer's ids for the prompt
  case{i}.prompt_embeds                           (1, 77, 16) the context: both encoders' hidden_states[-2]
  case{i}.pooled_prompt_embeds                    (1, 16) text_encoder_2's text_embeds
  case{i}.negative_prompt_embeds, case{i}.negative_pooled_prompt_embeds  the same for the negative prompt
and the metadata "cases" (their count), case{i}.prompt, case{i}.negative_prompt (absent: none given, diffusers'
negative_prompt=None) and case{i}.force_zeros_for_empty_prompt ("true"/"false", the pipeline's config).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from diffusers import StableDiffusionXLPipeline
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import clip_vocab  # noqa: E402
import st_io  # noqa: E402
from export_tiny_sd import print_file_sizes, randomize  # noqa: E402  (every parameter random)

# SDXL's published text_encoder/ and text_encoder_2/ configs carry these (pre-#24773) ids.
LEGACY_IDS = dict(bos_token_id=0, eos_token_id=2, pad_token_id=1)
TEXT_ENCODER = dict(vocab_size=49408, hidden_size=8, intermediate_size=32, num_hidden_layers=3, num_attention_heads=1,
                    hidden_act="quick_gelu", max_position_embeddings=77, projection_dim=8, **LEGACY_IDS)
TEXT_ENCODER_2 = dict(vocab_size=49408, hidden_size=8, intermediate_size=24, num_hidden_layers=4, num_attention_heads=1,
                      hidden_act="gelu", max_position_embeddings=77, projection_dim=16, **LEGACY_IDS)

# (prompt, negative prompt or None, force_zeros_for_empty_prompt): plain with no negative prompt (zeros),
# punctuation with the pad token "!" and a negative prompt, one over 77 tokens (cut), the empty prompt, and no
# negative prompt with force_zeros_for_empty_prompt off (the empty negative prompt encoded).
CASES = [("a watercolor fox", None, True),
         ("Hello, World!! It's 4:30 -- café?", "blurry, low quality", True),
         (" ".join(["a red fox in the snow"] * 20), "ugly", True),
         ("", None, True),
         ("a red fox in the snow", None, False)]


def save_tokenizer(vocab_gz, out_dir, pad_token):
    vocab, merges = clip_vocab.write_vocab_and_merges(vocab_gz, "/tmp/tiny_sdxl_tokenizer")
    CLIPTokenizer(vocab, merges, pad_token=pad_token, model_max_length=77).save_pretrained(out_dir)
    os.remove(os.path.join(out_dir, "tokenizer.json"))
    clip_vocab.write_vocab_and_merges(vocab_gz, out_dir)
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": pad_token,
                   "unk_token": "<|endoftext|>"}, f, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("vocab_gz")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    gen = torch.Generator().manual_seed(0)
    for name, cls, cfg in (("text_encoder", CLIPTextModel, TEXT_ENCODER),
                           ("text_encoder_2", CLIPTextModelWithProjection, TEXT_ENCODER_2)):
        model = cls(CLIPTextConfig(**cfg))
        randomize(model, gen)
        model.to(torch.float16).save_pretrained(os.path.join(a.out, name))
    save_tokenizer(a.vocab_gz, os.path.join(a.out, "tokenizer"), "<|endoftext|>")
    save_tokenizer(a.vocab_gz, os.path.join(a.out, "tokenizer_2"), "!")

    # Everything back from the files, as diffusers' from_pretrained reads an SDXL folder's text side.
    load = dict(torch_dtype=torch.float32, attn_implementation="eager")
    parts = dict(
        text_encoder=CLIPTextModel.from_pretrained(os.path.join(a.out, "text_encoder"), **load).eval(),
        text_encoder_2=CLIPTextModelWithProjection.from_pretrained(os.path.join(a.out, "text_encoder_2"), **load).eval(),
        tokenizer=CLIPTokenizer.from_pretrained(os.path.join(a.out, "tokenizer")),
        tokenizer_2=CLIPTokenizer.from_pretrained(os.path.join(a.out, "tokenizer_2")))
    assert parts["tokenizer"].pad_token == "<|endoftext|>" and parts["tokenizer_2"].pad_token == "!"
    tensors, metadata = {}, {"cases": str(len(CASES))}
    for i, (prompt, negative, force_zeros) in enumerate(CASES):
        pipe = StableDiffusionXLPipeline(vae=None, unet=None, scheduler=None, force_zeros_for_empty_prompt=force_zeros,
                                         add_watermarker=False, **parts)
        embeds, negative_embeds, pooled, negative_pooled = pipe.encode_prompt(
            prompt, device="cpu", num_images_per_prompt=1, do_classifier_free_guidance=True, negative_prompt=negative)
        for key, tok in (("input_ids", parts["tokenizer"]), ("input_ids_2", parts["tokenizer_2"])):
            ids = tok(prompt, padding="max_length", max_length=77, truncation=True, return_tensors="np").input_ids
            tensors[f"case{i}.{key}"] = ids.astype(np.int32)
        tensors[f"case{i}.prompt_embeds"] = embeds.float().numpy()
        tensors[f"case{i}.pooled_prompt_embeds"] = pooled.float().numpy()
        tensors[f"case{i}.negative_prompt_embeds"] = negative_embeds.float().numpy()
        tensors[f"case{i}.negative_pooled_prompt_embeds"] = negative_pooled.float().numpy()
        metadata[f"case{i}.prompt"] = prompt
        if negative is not None:
            metadata[f"case{i}.negative_prompt"] = negative
        metadata[f"case{i}.force_zeros_for_empty_prompt"] = "true" if force_zeros else "false"
        print(f"case{i}: prompt_embeds {tuple(embeds.shape)} |{embeds.norm():.4f}|, pooled {tuple(pooled.shape)} "
              f"|{pooled.norm():.4f}|, negative |{negative_embeds.norm():.4f}| |{negative_pooled.norm():.4f}|")
    st_io.write(os.path.join(a.out, "text_reference.safetensors"), tensors, metadata)
    print_file_sizes(a.out)


if __name__ == "__main__":
    main()
