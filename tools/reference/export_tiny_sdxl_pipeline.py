"""A tiny random-weight SDXL pipeline folder, written by diffusers' own save_pretrained, and diffusers'
StableDiffusionXLPipeline / StableDiffusionXLImg2ImgPipeline outputs for it, for rtvd's CPU tests (issue 28).

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sdxl_pipeline.py TEXT_DIR OUT_DIR

TEXT_DIR is tools/reference/export_tiny_sdxl_text.py's output (tests/data/tiny_sdxl): its text_encoder/,
text_encoder_2/, tokenizer/ and tokenizer_2/ are copied byte for byte (git stores them once), and the U-Net is
sized to them. OUT_DIR (tests/data/tiny_sdxl_pipeline) gets:
  model/      an SDXL diffusers folder (model_index.json as StableDiffusionXLPipeline saves it, fp16 weights):
              a U-Net of SDXL's structure cut down as export_tiny_sdxl.py's (16/24/32 channels,
              transformer_layers_per_block [1, 2, 2], heads of dim 8, linear projections, addition_embed_type
              "text_time", addition_time_embed_dim 8) whose cross_attention_dim is the two encoders' widths summed
              and whose projection_class_embeddings_input_dim is 6 x 8 + text_encoder_2's projection_dim; a 2-level
              AutoencoderKL with SDXL's scaling factor 0.13025 and force_upcast; SDXL-Turbo's scheduler
              (EulerAncestralDiscreteScheduler, trailing spacing). Every parameter random (randomize).
  pipelines.safetensors / pipelines.json
              each case of RUNS run in fp32 on the CPU from the folder as saved: source_image (1, 3, 48, 64) in
              [0, 1] (64 wide, 48 high: the time ids tell height from width); per case the given latents
              (txt2img) or the noise img2img's prepare_latents draws (img2img, recorded), the noise Euler ancestral
              draws at each step i where it adds any
              (step_noise_i, recorded), and the final latents and image (output_type "pt",
              [0, 1]). img2img encodes with the latent distribution's mean, as rtvd does (diffusers samples it by
              default). pipelines.json names the cases, their settings and their scheduler's config. rtvd's test
              (tests/sdxl_pipeline_test.cpp) feeds the same latents and noise to rtvd's frame.

On the GPU machine, full size (never committed: ~7 GB):

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sdxl_pipeline.py --full VOCAB_GZ OUT_DIR

writes OUT_DIR/model, a random-weight pipeline of SDXL's published architecture (the U-Net of 320/640/1280
channels with transformer depths [1, 2, 10] and context 2048, CLIP ViT-L and OpenCLIP ViT-bigG with their
tokenizers from VOCAB_GZ, the SDXL VAE; SDXL-Turbo's scheduler), fp16, and FULL_RUNS in fp32 on the GPU at 512x512
and 1024x1024 into OUT_DIR/pipelines.*, for RTVD_SDXL_PARITY_DIR=OUT_DIR tests/sd_pipeline_cuda_test. With
--weights-only it writes the model and OUT_DIR/taesdxl, a random-weight AutoencoderTiny of TAESDXL's published
architecture (fp16), and runs nothing: tools/perf_table_sdxl.py's weights.
"""
import argparse
import importlib
import json
import os
import shutil
import sys
import traceback

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_sd_references import RecordNoise  # noqa: E402  (what a module draws through its randn_tensor)
from export_tiny_sd import print_file_sizes, randomize  # noqa: E402  (every parameter random)

ADDITION_TIME_EMBED_DIM = 8
HEIGHT, WIDTH = 48, 64  # the images: 24x32 latents through the 2-level VAE
TEXT_PARTS = ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2")

# (name, mode, sampler, steps, guidance, strength, prompt, negative prompt): SDXL-Turbo's 1 and 2 steps without
# guidance, guided with a negative prompt and with none (force_zeros_for_empty_prompt: zeros), Euler, img2img.
RUNS = [
    ("txt2img_euler_a_1step", "txt2img", "euler_a", 1, 0.0, 1.0, "a watercolor fox", ""),
    ("txt2img_euler_a_2steps", "txt2img", "euler_a", 2, 0.0, 1.0, "a watercolor fox", ""),
    ("txt2img_euler_a_g5", "txt2img", "euler_a", 2, 5.0, 1.0, "a watercolor fox", "blurry"),
    ("txt2img_euler_a_g5_no_negative", "txt2img", "euler_a", 2, 5.0, 1.0, "a red fox in the snow", ""),
    ("txt2img_euler_g0", "txt2img", "euler", 2, 0.0, 1.0, "a watercolor fox", ""),
    ("img2img_euler_a_s05", "img2img", "euler_a", 4, 0.0, 0.5, "a watercolor fox", ""),
    ("img2img_euler_g4_s05", "img2img", "euler", 4, 4.0, 0.5, "a watercolor fox", "blurry"),
]

# Full size (--full): (name, mode, sampler, steps, guidance, strength, prompt, negative prompt, size).
FULL_RUNS = [
    ("txt2img_euler_a_1step_512", "txt2img", "euler_a", 1, 0.0, 1.0, "a watercolor fox", "", 512),
    ("img2img_euler_a_s05_512", "img2img", "euler_a", 2, 0.0, 0.5, "a watercolor fox", "", 512),
    ("txt2img_euler_a_g5_512", "txt2img", "euler_a", 2, 5.0, 1.0, "a watercolor fox", "blurry", 512),
    ("txt2img_euler_a_1step_1024", "txt2img", "euler_a", 1, 0.0, 1.0, "a watercolor fox", "", 1024),
]

EULER_A_MODULE = "diffusers.schedulers.scheduling_euler_ancestral_discrete"
IMG2IMG_MODULE = "diffusers.pipelines.stable_diffusion_xl.pipeline_stable_diffusion_xl_img2img"


def write_model(text_dir, model_dir, gen):
    from diffusers import (AutoencoderKL, EulerAncestralDiscreteScheduler, StableDiffusionXLPipeline,
                           UNet2DConditionModel)
    from transformers import CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer
    te = CLIPTextModel.from_pretrained(os.path.join(text_dir, "text_encoder"))
    te2 = CLIPTextModelWithProjection.from_pretrained(os.path.join(text_dir, "text_encoder_2"))
    context = te.config.hidden_size + te2.config.hidden_size
    pooled = te2.config.projection_dim
    unet = UNet2DConditionModel(
        sample_size=HEIGHT // 2, in_channels=4, out_channels=4, block_out_channels=(16, 24, 32), layers_per_block=2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 3, 4), transformer_layers_per_block=(1, 2, 2), cross_attention_dim=context,
        norm_num_groups=8, use_linear_projection=True, addition_embed_type="text_time",
        addition_time_embed_dim=ADDITION_TIME_EMBED_DIM,
        projection_class_embeddings_input_dim=pooled + 6 * ADDITION_TIME_EMBED_DIM)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(16, 32), layers_per_block=1,
                        latent_channels=4, norm_num_groups=8, sample_size=WIDTH, scaling_factor=0.13025,
                        force_upcast=True)
    for m in (unet, vae):
        randomize(m, gen)
    scheduler = EulerAncestralDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                                num_train_timesteps=1000, prediction_type="epsilon",
                                                timestep_spacing="trailing", steps_offset=1)
    pipe = StableDiffusionXLPipeline(
        vae=vae, text_encoder=te, text_encoder_2=te2, unet=unet, scheduler=scheduler,
        tokenizer=CLIPTokenizer.from_pretrained(os.path.join(text_dir, "tokenizer")),
        tokenizer_2=CLIPTokenizer.from_pretrained(os.path.join(text_dir, "tokenizer_2")),
        force_zeros_for_empty_prompt=True, add_watermarker=False)
    pipe.to(torch.float16).save_pretrained(model_dir, safe_serialization=True)
    # The text side as export_tiny_sdxl_text.py wrote it (its tokenizers without the 3.6 MB tokenizer.json).
    for part in TEXT_PARTS:
        shutil.rmtree(os.path.join(model_dir, part))
        shutil.copytree(os.path.join(text_dir, part), os.path.join(model_dir, part))
    print(f"model: context {context} (text_encoder {te.config.hidden_size} + text_encoder_2 {te2.config.hidden_size}),"
          f" pooled {pooled}, projection_class_embeddings_input_dim {unet.config.projection_class_embeddings_input_dim}")


def write_full_model(vocab_gz, model_dir, gen):
    """SDXL's published architecture with random weights (randomize), fp16, as StableDiffusionXLPipeline saves it."""
    from diffusers import (AutoencoderKL, EulerAncestralDiscreteScheduler, StableDiffusionXLPipeline,
                           UNet2DConditionModel)
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer
    import clip_vocab
    te = CLIPTextModel(CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                      num_attention_heads=12, hidden_act="quick_gelu", max_position_embeddings=77,
                                      projection_dim=768))
    te2 = CLIPTextModelWithProjection(CLIPTextConfig(
        vocab_size=49408, hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20,
        hidden_act="gelu", max_position_embeddings=77, projection_dim=1280))
    unet = UNet2DConditionModel(
        sample_size=128, block_out_channels=(320, 640, 1280), layers_per_block=2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(5, 10, 20),
        transformer_layers_per_block=(1, 2, 10), cross_attention_dim=2048, use_linear_projection=True,
        addition_embed_type="text_time", addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816)
    vae = AutoencoderKL(block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, layers_per_block=2, latent_channels=4,
                        sample_size=1024, scaling_factor=0.13025, force_upcast=True)
    for m in (te, te2, unet, vae):
        randomize(m, gen)
    vocab, merges = clip_vocab.write_vocab_and_merges(vocab_gz, "/tmp/sdxl_full_tokenizer")
    scheduler = EulerAncestralDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                                num_train_timesteps=1000, prediction_type="epsilon",
                                                timestep_spacing="trailing", steps_offset=1)
    pipe = StableDiffusionXLPipeline(
        vae=vae, text_encoder=te, text_encoder_2=te2, unet=unet, scheduler=scheduler,
        tokenizer=CLIPTokenizer(vocab, merges, pad_token="<|endoftext|>", model_max_length=77),
        tokenizer_2=CLIPTokenizer(vocab, merges, pad_token="!", model_max_length=77),
        force_zeros_for_empty_prompt=True, add_watermarker=False)
    pipe.to(torch.float16).save_pretrained(model_dir, safe_serialization=True)
    print(f"full size: {sum(p.numel() for p in unet.parameters())} U-Net parameters", flush=True)


def write_full_taesdxl(out, gen):
    """TAESDXL's architecture (AutoencoderTiny's defaults; its latents need no scaling) with random weights, fp16."""
    from diffusers import AutoencoderTiny
    taesdxl = AutoencoderTiny()
    randomize(taesdxl, gen)
    taesdxl.to(torch.float16).save_pretrained(out, safe_serialization=True)


def export_pipelines(model_dir, out, gen, runs=None, device="cpu", vae=None):
    """runs (RUNS' format, or FULL_RUNS' with a size each) on model_dir's folder, with its own VAE or with vae (an
    autoencoder module, such as an AutoencoderTiny: the cases say "vae": "tiny")."""
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLImg2ImgPipeline, StableDiffusionXLPipeline
    img2img_module = importlib.import_module(IMG2IMG_MODULE)
    retrieve = img2img_module.retrieve_latents
    img2img_module.retrieve_latents = lambda out, generator=None, sample_mode="sample": retrieve(out, generator, "argmax")
    base = StableDiffusionXLPipeline.from_pretrained(model_dir, torch_dtype=torch.float32, add_watermarker=False)
    if vae is not None:
        base = StableDiffusionXLPipeline(**{**base.components, "vae": vae}, add_watermarker=False)
    base.to(device)
    base.set_progress_bar_config(disable=True)
    runs = [r if len(r) == 9 else r + (None,) for r in runs or RUNS]
    full = runs[0][8] is not None
    factor = base.vae_scale_factor
    img2img_size = next((r[8] for r in runs if r[1] == "img2img"), None)
    image = torch.rand(1, 3, img2img_size or HEIGHT, img2img_size or WIDTH, generator=gen)  # [0, 1], as PIL's
    cases, tensors = [], {"source_image": image}
    for name, mode, sampler, steps, guidance, strength, prompt, negative, size in runs:
        height, width = (size, size) if full else (HEIGHT, WIDTH)
        try:
            comps = dict(base.components)
            if sampler == "euler":
                comps["scheduler"] = EulerDiscreteScheduler.from_config(base.scheduler.config)
            cls = StableDiffusionXLPipeline if mode == "txt2img" else StableDiffusionXLImg2ImgPipeline
            pipe = cls(**comps, add_watermarker=False)
            pipe.set_progress_bar_config(disable=True)
            kw = dict(prompt=prompt, negative_prompt=negative or None, num_inference_steps=steps,
                      guidance_scale=guidance)
            if mode == "txt2img":
                latents = torch.randn(1, 4, height // factor, width // factor, generator=gen)
                tensors[f"{name}.latents"] = latents
                kw.update(latents=latents.to(device), height=height, width=width)
            else:
                kw.update(image=image.to(device), strength=strength)
            seed = 2000 + len(cases)
            with torch.no_grad():
                with RecordNoise(IMG2IMG_MODULE) as start, RecordNoise(EULER_A_MODULE) as steps_noise:
                    final = pipe(**kw, output_type="latent", generator=torch.Generator().manual_seed(seed)).images
                img = pipe(**kw, output_type="pt", generator=torch.Generator().manual_seed(seed)).images
            if mode == "img2img":
                assert len(start.drawn) == 1, f"img2img drew {len(start.drawn)} tensors, expected the noise alone"
                tensors[f"{name}.noise"] = start.drawn[0].cpu()
            # Euler ancestral's step i adds its noise times sigma_up, which is 0 where the next sigma is (the last
            # step at trailing spacing): only the noise that counts is kept.
            sigmas = pipe.scheduler.sigmas[-(len(steps_noise.drawn) + 1):]
            kept = [i for i in range(len(steps_noise.drawn)) if float(sigmas[i + 1]) > 0]
            for i in kept:
                tensors[f"{name}.step_noise_{i}"] = steps_noise.drawn[i].cpu()
            tensors[f"{name}.final_latents"] = final.float().cpu()
            tensors[f"{name}.image"] = img.float().cpu()
            scheduler = {k: v for k, v in pipe.scheduler.config.items() if not k.startswith("_")}
            scheduler["_class_name"] = type(pipe.scheduler).__name__
            cases.append(dict(name=name, mode=mode, sampler=sampler, steps=steps, guidance=guidance, strength=strength,
                              prompt=prompt, negative_prompt=negative, seed=seed, height=height, width=width,
                              step_noises=kept, scheduler=scheduler, **({"vae": "tiny"} if vae else {})))
            print(f"pipeline {name}: image {tuple(img.shape)} mean {float(img.mean()):.4f}, "
                  f"noise added at steps {kept}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported, the others go on
            print(f"pipeline {name}: FAILED {e!r}\n{traceback.format_exc()}", flush=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out, "pipelines.safetensors"))
    with open(os.path.join(out, "pipelines.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    return len(cases) == len(runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("text_dir", help="export_tiny_sdxl_text.py's output (tests/data/tiny_sdxl); with --full, none")
    ap.add_argument("out", nargs="?", help="tests/data/tiny_sdxl_pipeline; with --full, where the model goes")
    ap.add_argument("--full", action="store_true",
                    help="text_dir is then CLIP's vocabulary (.txt.gz): SDXL at full size on the GPU (see above)")
    ap.add_argument("--weights-only", action="store_true", help="with --full: the model and TAESDXL, no pipelines")
    a = ap.parse_args()
    if a.full:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_grad_enabled(False)
        gen = torch.Generator().manual_seed(29)
        os.makedirs(a.out, exist_ok=True)
        write_full_model(a.text_dir, os.path.join(a.out, "model"), gen)
        if a.weights_only:
            write_full_taesdxl(os.path.join(a.out, "taesdxl"), gen)
            sys.exit(0)
        sys.exit(0 if export_pipelines(os.path.join(a.out, "model"), a.out, gen, FULL_RUNS, "cuda") else 1)
    for part in TEXT_PARTS:
        if not os.path.isdir(os.path.join(a.text_dir, part)):
            sys.exit(f"{a.text_dir}/{part}: missing (run tools/reference/export_tiny_sdxl_text.py into it first)")
    torch.set_grad_enabled(False)
    gen = torch.Generator().manual_seed(28)
    model_dir = os.path.join(a.out, "model")
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)
    write_model(a.text_dir, model_dir, gen)
    finish(a.out, export_pipelines(model_dir, a.out, gen))


def finish(out, ok):
    """Prints the size of every file written under out, and exits 0 when every case ran."""
    print_file_sizes(out)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
