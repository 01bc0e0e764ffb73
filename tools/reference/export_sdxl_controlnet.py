"""A full-size random-weight SDXL ControlNet and diffusers' StableDiffusionXLControlNetPipeline /
StableDiffusionXLControlNetImg2ImgPipeline runs with it at 1024x1024, fp32 on the GPU, for
RTVD_SDXL_CONTROLNET_PARITY_DIR=OUT_DIR tests/sd_pipeline_cuda_test (issue 29). On the GPU machine:

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_sdxl_controlnet.py VOCAB_GZ OUT_DIR

OUT_DIR gets (never committed: ~7 GB):
  model/      export_tiny_sdxl_pipeline.py --full's random-weight SDXL of the published architecture (SDXL-Turbo's
              scheduler), fp16; kept when it is there
  net1/       ControlNetModel.from_unet of its U-Net (the published conditioning embedding (16, 32, 96, 256)), every
              parameter random (the zero convolutions too), fp16
  pipelines.safetensors / pipelines.json
              RUNS at SIZE: control1 (1, 3, SIZE, SIZE) the control image in [0, 1], source_image the img2img source;
              per run the given latents (txt2img) or the noise img2img draws, the noise Euler ancestral draws where it
              adds any (step_noise_i), the final latents and the image (output_type "pt"), as
              export_tiny_sdxl_pipeline.py and export_tiny_controlnet.py record theirs, in the format
              tests/support/sd_pipeline_reference.cpp reads. img2img encodes with the latent mean, as rtvd does.
"""
import argparse
import importlib
import json
import os
import sys
import traceback

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_sd_references import RecordNoise  # noqa: E402
from export_tiny_sd import randomize  # noqa: E402
from export_tiny_sdxl_pipeline import EULER_A_MODULE, write_full_model  # noqa: E402

SIZE = 1024
IMG2IMG_MODULE = "diffusers.pipelines.controlnet.pipeline_controlnet_sd_xl_img2img"
# (name, mode, steps, guidance, strength, scale, start, end): SDXL-Turbo's real-time frames with one net, and a
# guided one with the net for its first half of the steps.
RUNS = [
    ("txt2img_cn_1step_1024", "txt2img", 1, 0.0, 1.0, 0.8, 0.0, 1.0),
    ("img2img_cn_s05_1024", "img2img", 2, 0.0, 0.5, 0.6, 0.0, 1.0),
    ("txt2img_cn_g5_end05_1024", "txt2img", 2, 5.0, 1.0, 1.0, 0.0, 0.5),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vocab_gz", help="CLIP's vocabulary (.txt.gz), for the model's tokenizers")
    ap.add_argument("out")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    from diffusers import (ControlNetModel, StableDiffusionXLControlNetImg2ImgPipeline,
                           StableDiffusionXLControlNetPipeline, StableDiffusionXLPipeline)
    gen = torch.Generator().manual_seed(2929)
    model_dir = os.path.join(a.out, "model")
    if not os.path.isfile(os.path.join(model_dir, "model_index.json")):
        os.makedirs(a.out, exist_ok=True)
        write_full_model(a.vocab_gz, model_dir, torch.Generator().manual_seed(29))
    base = StableDiffusionXLPipeline.from_pretrained(model_dir, torch_dtype=torch.float32, add_watermarker=False)
    net = ControlNetModel.from_unet(base.unet, conditioning_embedding_out_channels=(16, 32, 96, 256))
    randomize(net, gen)
    net_dir = os.path.join(a.out, "net1")
    net.to(torch.float16).save_pretrained(net_dir, safe_serialization=True)
    net = ControlNetModel.from_pretrained(net_dir).float().eval().to("cuda")
    base.to("cuda")

    img2img_module = importlib.import_module(IMG2IMG_MODULE)
    retrieve = img2img_module.retrieve_latents
    img2img_module.retrieve_latents = lambda out, generator=None, sample_mode="sample": retrieve(out, generator, "argmax")
    control = torch.rand(1, 3, SIZE, SIZE, generator=gen)
    source = torch.rand(1, 3, SIZE, SIZE, generator=gen)
    tensors = {"control1": control, "source_image": source}
    factor = base.vae_scale_factor
    cases, ok = [], True
    for name, mode, steps, guidance, strength, scale, start, end in RUNS:
        try:
            cls = StableDiffusionXLControlNetPipeline if mode == "txt2img" else StableDiffusionXLControlNetImg2ImgPipeline
            pipe = cls(**base.components, controlnet=net, add_watermarker=False)
            pipe.set_progress_bar_config(disable=True)
            kw = dict(prompt="a watercolor fox", negative_prompt="blurry" if guidance else None, num_inference_steps=steps,
                      guidance_scale=guidance, controlnet_conditioning_scale=scale, control_guidance_start=start,
                      control_guidance_end=end, height=SIZE, width=SIZE)
            if mode == "txt2img":
                latents = torch.randn(1, 4, SIZE // factor, SIZE // factor, generator=gen)
                tensors[f"{name}.latents"] = latents
                kw.update(image=control.to("cuda"), latents=latents.to("cuda"))
            else:
                kw.update(image=source.to("cuda"), control_image=control.to("cuda"), strength=strength)
            seed = 2900 + len(cases)
            with RecordNoise(IMG2IMG_MODULE) as drawn_start, RecordNoise(EULER_A_MODULE) as drawn_steps:
                final = pipe(**kw, output_type="latent", generator=torch.Generator().manual_seed(seed)).images
            img = pipe(**kw, output_type="pt", generator=torch.Generator().manual_seed(seed)).images
            if mode == "img2img":
                assert len(drawn_start.drawn) == 1, f"img2img drew {len(drawn_start.drawn)} tensors, expected one"
                tensors[f"{name}.noise"] = drawn_start.drawn[0].cpu()
            sigmas = pipe.scheduler.sigmas[-(len(drawn_steps.drawn) + 1):]
            kept = [i for i in range(len(drawn_steps.drawn)) if float(sigmas[i + 1]) > 0]
            for i in kept:
                tensors[f"{name}.step_noise_{i}"] = drawn_steps.drawn[i].cpu()
            tensors[f"{name}.final_latents"] = final.float().cpu()
            tensors[f"{name}.image"] = img.float().cpu()
            scheduler = {k: v for k, v in pipe.scheduler.config.items() if not k.startswith("_")}
            scheduler["_class_name"] = type(pipe.scheduler).__name__
            cases.append(dict(name=name, mode=mode, sampler="euler_a", steps=steps, guidance=guidance, strength=strength,
                              prompt=kw["prompt"], negative_prompt=kw["negative_prompt"] or "", seed=seed, height=SIZE,
                              width=SIZE, step_noises=kept, scheduler=scheduler, nets=[1],
                              controlnet_conditioning_scale=[scale], control_guidance_start=[start],
                              control_guidance_end=[end], guess_mode=False))
            print(f"pipeline {name}: image {tuple(img.shape)} mean {float(img.mean()):.4f}, noise at steps {kept}",
                  flush=True)
        except Exception as e:  # noqa: BLE001 - reported, the others go on
            ok = False
            print(f"pipeline {name}: FAILED {e!r}\n{traceback.format_exc()}", flush=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(a.out, "pipelines.safetensors"))
    with open(os.path.join(a.out, "pipelines.json"), "w") as f:
        json.dump({"image_size": SIZE, "cases": cases}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
