"""diffusers' own outputs for the scaled-down SD pipeline of tests/data/tiny_sd, for rtvd's CPU tests (issue 16).

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_sd_references.py TINY_SD_DIR OUT_DIR
    PYTHONPATH=<diffusers>/src python3 tools/reference/export_sd_references.py TINY_SD_DIR OUT_DIR --full VOCAB_GZ \
        [--arch sd-turbo|sd15] [--weights-only]

--full (on the GPU machine) writes instead a random-weight SD-Turbo-architecture pipeline (OUT_DIR/model: SD 2.1's
U-Net, the SD VAE, OpenCLIP-H; fp16), or with --arch sd15 SD 1.5's (CLIP ViT-L/14, 8 heads, conv projections;
also OUT_DIR/model.safetensors, diffusers' conversion of it to one file), and a TAESD of the published
architecture (OUT_DIR/taesd), then
pipelines.json / pipelines.safetensors as below for SD-Turbo's cases at 512x512, run in fp32 on the GPU (TF32
off): what tests/sd_pipeline_cuda_test reads from RTVD_SD_PARITY_DIR. --weights-only stops after writing the
weights (tools/perf_table.py times them).

Everything runs in fp32 on the CPU from the fp16 weights as stored. OUT_DIR gets:
  tiny_taesd/                 an AutoencoderTiny of TAESD's layout with 16 channels (save_pretrained, fp16)
  autoencoders.safetensors    vae_image (1,3,64,64) in [-1,1], vae_mean (its latent distribution's mean),
                              vae_latent and vae_decoded; taesd_image, taesd_latents (encode), taesd_latent and
                              taesd_decoded: NCHW, as diffusers lays them out
  schedulers.json             for Euler (discrete), LCM and DDIM under each spacing, prediction type, step count
                              and strength: the config, timesteps, the start sample (noise * init_noise_sigma, or
                              add_noise of an image latent at the first timestep), then per step the U-Net's input
                              (scale_model_input), a random model output and the scheduler's prev_sample (LCM's
                              injected noise recorded); tensors (1,4,2,2), flattened NCHW
  pipelines.safetensors       StableDiffusionPipeline / Img2ImgPipeline runs on TINY_SD_DIR: source_image (1,3,64,64)
                              in [0,1]; for each case the given latents (txt2img) or the noise img2img draws, the
                              noise LCM injects after each step (lcm_noise_I), and the final latents and image
                              (output_type "pt", [0,1]); img2img encodes with the latent mean, as rtvd does;
                              pipelines.json names the cases and their settings
  lora_peft.safetensors, lora_diffusers.safetensors, lora_kohya.safetensors
                              one random LoRA (U-Net: attention, feed-forward, projections, ResNet convs and time
                              projections, samplers' convs; text encoder: q/k/v/out and the MLP) in three formats
  lora_fused.safetensors      unet.NAME / text_encoder.NAME: every weight that load_lora_weights (the PEFT file)
                              + fuse_lora(lora_scale=0.7) changed, fp32; the three formats are one LoRA (the
                              kohya file's alpha 8 at rank 4 with lora_up halved), and log.txt says how far each
                              format's fused weights are from W + 0.7 B A
  tiny_sd_sd1.safetensors     TINY_SD_DIR as one file by diffusers' convert_diffusers_to_original_stable_diffusion
                              (model.diffusion_model, first_stage_model, cond_stage_model.transformer)
  tiny_sd_openclip.safetensors the same with the text encoder in OpenCLIP's layout (cond_stage_model.model: fused
                              in_proj, one extra final block that SD 2.x does not use), checked by diffusers' own
                              convert_open_clip_checkpoint
  log.txt                     what ran, and every check's result
"""
import json
import os
import subprocess
import sys
import traceback
import types

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_tiny_sd import randomize  # noqa: E402

LOG = []


def log(*args):
    line = " ".join(str(a) for a in args)
    LOG.append(line)
    print(line, flush=True)


def flat(t):
    return [float(v) for v in t.detach().double().flatten()]


# ---------------------------------------------------------------- autoencoders
def export_autoencoders(tiny_sd, out, gen):
    from diffusers import AutoencoderKL, AutoencoderTiny
    vae = AutoencoderKL.from_pretrained(os.path.join(tiny_sd, "vae"), torch_dtype=torch.float32).eval()
    taesd = AutoencoderTiny(encoder_block_out_channels=(16, 16, 16, 16), decoder_block_out_channels=(16, 16, 16, 16))
    randomize(taesd, gen)
    taesd.to(torch.float16).save_pretrained(os.path.join(out, "tiny_taesd"), safe_serialization=True)
    taesd = AutoencoderTiny.from_pretrained(os.path.join(out, "tiny_taesd"), torch_dtype=torch.float32).eval()
    t = {}
    with torch.no_grad():
        t["vae_image"] = torch.rand(1, 3, 64, 64, generator=gen) * 2 - 1
        t["vae_mean"] = vae.encode(t["vae_image"]).latent_dist.mean
        t["vae_latent"] = torch.randn(1, 4, 32, 32, generator=gen)
        t["vae_decoded"] = vae.decode(t["vae_latent"]).sample
        t["taesd_image"] = torch.rand(1, 3, 64, 64, generator=gen) * 2 - 1
        t["taesd_latents"] = taesd.encode(t["taesd_image"]).latents
        t["taesd_latent"] = torch.randn(1, 4, 8, 8, generator=gen) * 2
        t["taesd_decoded"] = taesd.decode(t["taesd_latent"]).sample
    save_file({k: v.contiguous() for k, v in t.items()}, os.path.join(out, "autoencoders.safetensors"))
    log("autoencoders: vae", tuple(t["vae_mean"].shape), tuple(t["vae_decoded"].shape), "taesd",
        tuple(t["taesd_latents"].shape), tuple(t["taesd_decoded"].shape))


# ---------------------------------------------------------------- schedulers
BETAS = dict(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, num_train_timesteps=1000)


def make_scheduler(kind, spacing, prediction):
    from diffusers import DDIMScheduler, EulerDiscreteScheduler, LCMScheduler
    if kind == "euler":
        return EulerDiscreteScheduler(timestep_spacing=spacing, prediction_type=prediction, steps_offset=1, **BETAS)
    if kind == "ddim":
        return DDIMScheduler(timestep_spacing=spacing, prediction_type=prediction, steps_offset=1, clip_sample=False,
                             set_alpha_to_one=False, **BETAS)
    return LCMScheduler(timestep_spacing=spacing, prediction_type=prediction, steps_offset=1, clip_sample=False,
                        set_alpha_to_one=True, original_inference_steps=50, timestep_scaling=10.0, **BETAS)


class RecordNoise:
    """Records the noise a scheduler's step draws through its module's randn_tensor (LCMScheduler adds fresh
    noise after every step but the last; EulerAncestralDiscreteScheduler after every step)."""

    def __init__(self, module_name="diffusers.schedulers.scheduling_lcm"):
        self.module_name = module_name

    def __enter__(self):
        import importlib
        self.module = importlib.import_module(self.module_name)
        self.original, self.drawn = self.module.randn_tensor, []

        def recording(*args, **kwargs):
            x = self.original(*args, **kwargs)
            self.drawn.append(x.clone())
            return x
        self.module.randn_tensor = recording
        return self

    def __exit__(self, *exc):
        self.module.randn_tensor = self.original


def trace(kind, spacing, prediction, steps, strength, gen):
    from diffusers import StableDiffusionImg2ImgPipeline
    s = make_scheduler(kind, spacing, prediction)
    s.set_timesteps(steps)
    case = dict(sampler=kind, timestep_spacing=spacing, prediction_type=prediction, steps=steps, strength=strength,
                config={k: v for k, v in s.config.items() if not k.startswith("_")},
                init_noise_sigma=float(s.init_noise_sigma))
    noise = torch.randn(1, 4, 2, 2, generator=gen)
    if strength < 1:
        # the img2img pipeline's own truncation of the schedule
        timesteps, _ = StableDiffusionImg2ImgPipeline.get_timesteps(types.SimpleNamespace(scheduler=s), steps, strength, "cpu")
        image_latent = torch.randn(1, 4, 2, 2, generator=gen)
        case["image_latent"] = flat(image_latent)
        sample = s.add_noise(image_latent, noise, timesteps[:1])
    else:
        timesteps = s.timesteps
        sample = noise * s.init_noise_sigma
    case["timesteps"] = [float(t) for t in timesteps]
    if hasattr(s, "sigmas"):
        case["sigmas"] = [float(v) for v in s.sigmas]
    case["noise"], case["start"] = flat(noise), flat(sample)
    case["steps_trace"] = []
    with RecordNoise() as record:
        drawn = record.drawn
        for t in timesteps:
            model_in = s.scale_model_input(sample, t)
            model_out = torch.randn(1, 4, 2, 2, generator=gen)
            n_before = len(drawn)
            kwargs = {"generator": torch.Generator().manual_seed(int(t) + 11)} if kind == "lcm" else {}
            if kind == "ddim":
                kwargs["eta"] = 0.0
            result = s.step(model_out, t, sample, **kwargs)
            sample = result.prev_sample
            step = dict(timestep=float(t), model_input=flat(model_in), model_output=flat(model_out),
                        prev_sample=flat(sample))
            if getattr(result, "denoised", None) is not None:
                step["denoised"] = flat(result.denoised)
            if len(drawn) > n_before:
                step["injected_noise"] = flat(drawn[-1])
            case["steps_trace"].append(step)
    return case


def export_schedulers(out, gen):
    cases = []
    grid = {"euler": (["leading", "trailing", "linspace"], [1, 2, 4, 25]),
            "ddim": (["leading", "trailing"], [1, 4, 10]),
            "lcm": (["leading", "trailing"], [1, 2, 4, 8])}
    for kind, (spacings, step_counts) in grid.items():
        for spacing in spacings:
            for prediction in ("epsilon", "v_prediction"):
                for steps in step_counts:
                    for strength in (1.0, 0.5):
                        try:
                            cases.append(trace(kind, spacing, prediction, steps, strength, gen))
                        except Exception as e:  # noqa: BLE001 - logged, the others go on
                            log(f"scheduler {kind} {spacing} {prediction} {steps} {strength}: FAILED {e!r}")
    with open(os.path.join(out, "schedulers.json"), "w") as f:
        json.dump({"cases": cases}, f)
    log(f"schedulers: {len(cases)} cases")


# ---------------------------------------------------------------- pipelines
TINY_RUNS = [  # (name, mode, sampler, vae, steps, guidance, strength, prompt, negative)
    ("txt2img_euler_g0", "txt2img", "euler", "full", 2, 0.0, 1.0, "a watercolor fox", ""),
    ("txt2img_euler_g5", "txt2img", "euler", "full", 2, 5.0, 1.0, "a watercolor fox", "blurry"),
    ("txt2img_ddim_g3", "txt2img", "ddim", "full", 3, 3.0, 1.0, "a red fox in the snow", ""),
    ("txt2img_lcm_g0", "txt2img", "lcm", "full", 4, 0.0, 1.0, "a watercolor fox", ""),
    ("txt2img_euler_taesd", "txt2img", "euler", "tiny", 1, 0.0, 1.0, "a watercolor fox", ""),
    ("img2img_euler_s05", "img2img", "euler", "full", 4, 0.0, 0.5, "a watercolor fox", ""),
    ("img2img_euler_g4", "img2img", "euler", "full", 4, 4.0, 0.75, "a watercolor fox", "blurry"),
    ("img2img_lcm_taesd", "img2img", "lcm", "tiny", 4, 0.0, 0.5, "a watercolor fox", ""),
]
# SD-Turbo's real-time cases at 512x512 (1-4 steps, no guidance), and guided and DDIM ones.
FULL_RUNS = [
    ("txt2img_euler_g0", "txt2img", "euler", "full", 1, 0.0, 1.0, "a watercolor fox", ""),
    ("txt2img_euler_g5", "txt2img", "euler", "full", 2, 5.0, 1.0, "a watercolor fox", "blurry"),
    ("txt2img_euler_taesd", "txt2img", "euler", "tiny", 1, 0.0, 1.0, "a watercolor fox", ""),
    ("img2img_euler_s05", "img2img", "euler", "full", 2, 0.0, 0.5, "a watercolor fox", ""),
    ("img2img_euler_taesd", "img2img", "euler", "tiny", 2, 0.0, 0.5, "a watercolor fox", ""),
    ("txt2img_ddim_g3", "txt2img", "ddim", "full", 3, 3.0, 1.0, "a red fox in the snow", ""),
    ("img2img_lcm_taesd", "img2img", "lcm", "tiny", 4, 0.0, 0.5, "a watercolor fox", ""),
]


def export_pipelines(model_dir, taesd_dir, out, gen, image_size=64, runs=TINY_RUNS, device="cpu"):
    from diffusers import (AutoencoderTiny, DDIMScheduler, LCMScheduler, StableDiffusionImg2ImgPipeline,
                           StableDiffusionPipeline)
    import diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion_img2img as img2img_module
    from diffusers.utils.torch_utils import randn_tensor
    # img2img encodes with the latent distribution's mean, as rtvd does (diffusers samples it by default)
    retrieve = img2img_module.retrieve_latents
    img2img_module.retrieve_latents = lambda out, generator=None, sample_mode="sample": retrieve(out, generator, "argmax")
    base = StableDiffusionPipeline.from_pretrained(model_dir, torch_dtype=torch.float32).to(device)
    base.set_progress_bar_config(disable=True)
    taesd = AutoencoderTiny.from_pretrained(taesd_dir, torch_dtype=torch.float32).to(device)
    cases, tensors = [], {}
    image = torch.rand(1, 3, image_size, image_size, generator=gen)  # [0, 1], as a PIL image would be
    tensors["source_image"] = image
    latent_size = base.unet.config.sample_size  # txt2img's latents: the U-Net's size

    def scheduler_for(name):
        if name == "euler":
            return base.scheduler
        cls = DDIMScheduler if name == "ddim" else LCMScheduler
        return cls.from_config(base.scheduler.config, timestep_spacing="leading")

    for name, mode, sampler, vae, steps, guidance, strength, prompt, negative in runs:
        try:
            comps = dict(base.components)
            comps["scheduler"] = scheduler_for(sampler)
            if vae == "tiny":
                comps["vae"] = taesd
            cls = StableDiffusionPipeline if mode == "txt2img" else StableDiffusionImg2ImgPipeline
            pipe = cls(**comps)
            pipe.set_progress_bar_config(disable=True)
            kw = dict(prompt=prompt, negative_prompt=negative or None, num_inference_steps=steps,
                      guidance_scale=guidance)
            seed = 1000 + len(cases)
            if mode == "txt2img":
                latents = torch.randn(1, 4, latent_size, latent_size, generator=gen)
                tensors[f"{name}.latents"] = latents
                kw["latents"] = latents.to(device)
            else:
                kw.update(image=image.to(device), strength=strength)
                # the noise prepare_latents draws with this generator: the first draw of the same seed and shape
                factor = 8 if vae == "tiny" else base.vae_scale_factor
                shape = (1, 4, image_size // factor, image_size // factor)
                tensors[f"{name}.noise"] = randn_tensor(shape, generator=torch.Generator().manual_seed(seed))
            with torch.no_grad():
                final = pipe(**kw, output_type="latent", generator=torch.Generator().manual_seed(seed)).images
                with RecordNoise() as record:
                    img = pipe(**kw, output_type="pt", generator=torch.Generator().manual_seed(seed)).images
            for i, n in enumerate(record.drawn):
                tensors[f"{name}.lcm_noise_{i}"] = n.cpu()
            tensors[f"{name}.final_latents"] = final.cpu()
            tensors[f"{name}.image"] = img.cpu()
            cases.append(dict(name=name, mode=mode, sampler=sampler, vae=vae, steps=steps, guidance=guidance,
                              strength=strength, prompt=prompt, negative_prompt=negative, seed=seed,
                              scheduler={k: v for k, v in pipe.scheduler.config.items() if not k.startswith("_")}))
            log(f"pipeline {name}: image {tuple(img.shape)} mean {float(img.mean()):.4f}")
        except Exception as e:  # noqa: BLE001
            log(f"pipeline {name}: FAILED {e!r}")
            log(traceback.format_exc())
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out, "pipelines.safetensors"))
    with open(os.path.join(out, "pipelines.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)


# ---------------------------------------------------------------- LoRA
UNET_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "proj_in", "proj_out", "ff.net.0.proj", "ff.net.2", "conv1",
                "conv2", "conv_shortcut", "time_emb_proj", "conv"]
TEXT_TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]


def export_lora(tiny_sd, out, gen):
    from diffusers import StableDiffusionPipeline
    from diffusers.utils import convert_state_dict_to_diffusers, convert_state_dict_to_kohya
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict
    pipe = StableDiffusionPipeline.from_pretrained(tiny_sd, torch_dtype=torch.float32)
    pipe.unet.add_adapter(LoraConfig(r=4, lora_alpha=4, init_lora_weights="gaussian", target_modules=UNET_TARGETS))
    pipe.text_encoder.add_adapter(LoraConfig(r=4, lora_alpha=4, init_lora_weights="gaussian", target_modules=TEXT_TARGETS))
    randomize(pipe.unet, gen, only=lambda name: "lora_" in name)
    randomize(pipe.text_encoder, gen, only=lambda name: "lora_" in name)
    unet_peft = get_peft_model_state_dict(pipe.unet)
    text_peft = get_peft_model_state_dict(pipe.text_encoder)
    # PEFT layout (lora_A / lora_B), as diffusers' load_lora_weights takes it
    peft = {f"unet.{k}": v for k, v in unet_peft.items()}
    peft.update({f"text_encoder.{k}": v for k, v in text_peft.items()})
    save_file({k: v.contiguous() for k, v in peft.items()}, os.path.join(out, "lora_peft.safetensors"))
    # diffusers' own save_lora_weights (lora.down / lora.up)
    StableDiffusionPipeline.save_lora_weights(out, unet_lora_layers=convert_state_dict_to_diffusers(unet_peft),
                                              text_encoder_lora_layers=convert_state_dict_to_diffusers(text_peft),
                                              weight_name="lora_diffusers.safetensors")
    # kohya (lora_unet_* / lora_te_*, lora_down / lora_up, alpha): alpha 8 at rank 4 scales by 2, so lora_up is
    # halved and every format fuses to the same weights; the text encoder named as SD 1.x kohya files name it
    # (lora_te_text_model_encoder_...)
    kohya = {}
    for k, v in convert_state_dict_to_kohya(peft).items():
        k = k.replace("lora_te1_", "lora_te_text_model_") if k.startswith("lora_te1_") else k
        kohya[k] = torch.tensor(8.0) if k.endswith(".alpha") else (v / 2 if ".lora_up." in k else v)
    save_file({k: v.contiguous() for k, v in kohya.items()}, os.path.join(out, "lora_kohya.safetensors"))
    log(f"lora: {len(peft)} PEFT tensors, {len(kohya)} kohya tensors")

    # the merge by its definition, W + scale * B A (alpha = rank), to check diffusers' against
    base = StableDiffusionPipeline.from_pretrained(tiny_sd, torch_dtype=torch.float32)
    manual = {}
    for m, lora in (("unet", unet_peft), ("text_encoder", text_peft)):
        weights = getattr(base, m).state_dict()
        for k, a in lora.items():
            if ".lora_A." not in k:
                continue
            name = k.replace(".lora_A.weight", ".weight")
            b = lora[k.replace(".lora_A.", ".lora_B.")]
            delta = (b.flatten(1) @ a.flatten(1)).reshape(weights[name].shape)
            manual[f"{m}.{name}"] = weights[name] + 0.7 * delta
    fused, results = {}, {}
    for fmt in ("peft", "diffusers", "kohya"):
        try:
            p = StableDiffusionPipeline.from_pretrained(tiny_sd, torch_dtype=torch.float32)
            before = {m: {k: v.clone() for k, v in getattr(p, m).state_dict().items()} for m in ("unet", "text_encoder")}
            p.load_lora_weights(out, weight_name=f"lora_{fmt}.safetensors", adapter_name="x")
            p.fuse_lora(lora_scale=0.7, components=["unet", "text_encoder"])
            p.unload_lora_weights()
            n = 0
            for m in ("unet", "text_encoder"):
                for k, v in getattr(p, m).state_dict().items():
                    k0 = k.replace(".base_layer", "")
                    if k0 in before[m] and not torch.equal(before[m][k0], v):
                        results.setdefault(fmt, {})[f"{m}.{k0}"] = v.float()
                        n += 1
            got = results.get(fmt, {})
            worst = max((float((got[k] - v).abs().max()) for k, v in manual.items() if k in got), default=float("nan"))
            log(f"lora {fmt}: fuse_lora changed {n} weights, {len(manual)} targeted; missing "
                f"{sorted(set(manual) - set(got))[:4]}; max |diffusers - W + 0.7 B A| {worst:.3g}")
        except Exception as e:  # noqa: BLE001
            log(f"lora {fmt}: FAILED {e!r}")
            log(traceback.format_exc())
    fused = results.get("peft") or manual
    log(f"lora_fused.safetensors from {'diffusers (PEFT file)' if 'peft' in results else 'the definition'}")
    save_file({k: v.contiguous() for k, v in fused.items()}, os.path.join(out, "lora_fused.safetensors"))


# ---------------------------------------------------------------- single files
def export_single_files(tiny_sd, out, diffusers_root):
    target = os.path.join(out, "tiny_sd_sd1.safetensors")
    script = os.path.join(diffusers_root, "scripts", "convert_diffusers_to_original_stable_diffusion.py")
    r = subprocess.run([sys.executable, script, "--model_path", tiny_sd, "--checkpoint_path", target, "--half",
                        "--use_safetensors"], capture_output=True, text=True)
    log(f"single file (sd1 layout): rc {r.returncode} {r.stderr[-2000:]}")
    sd = load_file(target)
    # transformers 5 saves CLIPTextModel without "text_model."; published SD 1.x files have it
    tp = "cond_stage_model.transformer."
    sd = {(tp + "text_model." + k[len(tp):] if k.startswith(tp) and not k.startswith(tp + "text_model.") else k): v
          for k, v in sd.items()}
    save_file({k: v.contiguous() for k, v in sd.items()}, target)
    text = {k: v for k, v in sd.items() if k.startswith("cond_stage_model.")}
    log(f"  {len(sd)} tensors, text encoder keys e.g. {sorted(text)[:2]}")
    # OpenCLIP's layout, as SD 2.x single files store their text encoder
    prefix = "cond_stage_model.model."
    te = load_file(os.path.join(tiny_sd, "text_encoder", "model.safetensors"))
    te = {k[len("text_model."):] if k.startswith("text_model.") else k: v for k, v in te.items()}
    layers = 1 + max(int(k.split(".")[2]) for k in te if k.startswith("encoder.layers."))
    oc = {prefix + "token_embedding.weight": te["embeddings.token_embedding.weight"],
          prefix + "positional_embedding": te["embeddings.position_embedding.weight"],
          prefix + "ln_final.weight": te["final_layer_norm.weight"], prefix + "ln_final.bias": te["final_layer_norm.bias"]}
    width = te["final_layer_norm.weight"].shape[0]
    oc[prefix + "text_projection"] = torch.randn(width, width).half()
    for i in range(layers + 1):  # the last block exists in OpenCLIP-H and SD 2.x never uses it
        src = i if i < layers else layers - 1
        a, b = f"encoder.layers.{src}.", f"{prefix}transformer.resblocks.{i}."
        oc[b + "attn.in_proj_weight"] = torch.cat([te[a + f"self_attn.{x}_proj.weight"] for x in "qkv"])
        oc[b + "attn.in_proj_bias"] = torch.cat([te[a + f"self_attn.{x}_proj.bias"] for x in "qkv"])
        for d, o in (("self_attn.out_proj", "attn.out_proj"), ("layer_norm1", "ln_1"), ("layer_norm2", "ln_2"),
                     ("mlp.fc1", "mlp.c_fc"), ("mlp.fc2", "mlp.c_proj")):
            oc[b + o + ".weight"] = te[a + d + ".weight"] * (1.5 if i == layers else 1)
            oc[b + o + ".bias"] = te[a + d + ".bias"].clone()  # save_file refuses tensors that share memory
    rest = {k: v for k, v in sd.items() if not k.startswith("cond_stage_model.")}
    rest.update(oc)
    save_file({k: v.contiguous() for k, v in rest.items()}, os.path.join(out, "tiny_sd_openclip.safetensors"),
              metadata={"format": "pt"})
    # diffusers' reader of that layout gives back the text encoder (the extra block dropped)
    from diffusers.loaders.single_file_utils import convert_open_clip_checkpoint
    back = convert_open_clip_checkpoint(types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=width)), oc)
    back = {k[len("text_model."):] if k.startswith("text_model.") else k: v for k, v in back.items()}
    back = {k: v for k, v in back.items() if not k.startswith(f"encoder.layers.{layers}.") and k != "text_projection.weight"}
    same = sorted(back) == sorted(te) and all(torch.equal(back[k], te[k]) for k in te)
    log(f"single file (openclip layout): {len(rest)} tensors; diffusers' convert_open_clip_checkpoint gives back the "
        f"text encoder exactly: {same}")


# SD 1.5's cases: its usual step counts, guidance, LCM (as with LCM-LoRA) and img2img.
SD15_RUNS = [
    ("txt2img_euler_g5", "txt2img", "euler", "full", 4, 5.0, 1.0, "a watercolor fox", "blurry"),
    ("txt2img_lcm_g0", "txt2img", "lcm", "full", 4, 0.0, 1.0, "a watercolor fox", ""),
    ("img2img_ddim_g3", "img2img", "ddim", "full", 4, 3.0, 0.5, "a red fox in the snow", ""),
    ("txt2img_euler_taesd", "txt2img", "euler", "tiny", 2, 0.0, 1.0, "a watercolor fox", ""),
]


def write_full_size(out, vocab_gz, gen, arch, diffusers_root):
    """Random-weight full-size pipeline of SD-Turbo's architecture (SD 2.1's U-Net, the SD VAE, OpenCLIP-H as
    diffusers stores it, Euler with trailing spacing) or SD 1.5's (CLIP ViT-L/14, 8 heads, conv projections,
    Euler with leading spacing; then diffusers' conversion to one file), and a TAESD of the published
    architecture, written by save_pretrained in fp16."""
    from diffusers import (AutoencoderKL, AutoencoderTiny, EulerDiscreteScheduler, StableDiffusionPipeline,
                           UNet2DConditionModel)
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer
    import clip_vocab
    sd15 = arch == "sd15"
    unet = (UNet2DConditionModel(sample_size=64, attention_head_dim=8, cross_attention_dim=768)
            if sd15 else UNet2DConditionModel(sample_size=64, attention_head_dim=(5, 10, 20, 20),
                                              cross_attention_dim=1024, use_linear_projection=True))
    vae = AutoencoderKL(block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, layers_per_block=2, latent_channels=4,
                        sample_size=512)
    text = CLIPTextModel(CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                        num_attention_heads=12, hidden_act="quick_gelu", max_position_embeddings=77,
                                        projection_dim=768) if sd15 else
                         CLIPTextConfig(vocab_size=49408, hidden_size=1024, intermediate_size=4096, num_hidden_layers=23,
                                        num_attention_heads=16, hidden_act="gelu", max_position_embeddings=77,
                                        projection_dim=512))
    taesd = AutoencoderTiny()
    for m in (unet, vae, text, taesd):
        randomize(m, gen)
    vocab, merges = clip_vocab.write_vocab_and_merges(vocab_gz, "/tmp/sd_full_tokenizer")
    tokenizer = CLIPTokenizer(vocab, merges, pad_token="<|endoftext|>" if sd15 else "!", model_max_length=77)
    scheduler = EulerDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                       timestep_spacing="leading" if sd15 else "trailing", steps_offset=1,
                                       prediction_type="epsilon")
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet, scheduler=scheduler,
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.to(torch.float16).save_pretrained(os.path.join(out, "model"), safe_serialization=True)
    taesd.to(torch.float16).save_pretrained(os.path.join(out, "taesd"), safe_serialization=True)
    log(f"full size ({arch}): wrote model/ and taesd/")
    if sd15:
        script = os.path.join(diffusers_root, "scripts", "convert_diffusers_to_original_stable_diffusion.py")
        r = subprocess.run([sys.executable, script, "--model_path", os.path.join(out, "model"), "--checkpoint_path",
                            os.path.join(out, "model.safetensors"), "--half", "--use_safetensors"],
                           capture_output=True, text=True)
        log(f"full size: single file by diffusers' conversion: rc {r.returncode} {r.stderr[-500:]}")


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("tiny_sd")
    ap.add_argument("out")
    ap.add_argument("--arch", choices=["sd-turbo", "sd15"], default="sd-turbo", help="--full's architecture")
    ap.add_argument("--full", metavar="VOCAB_GZ",
                    help="instead: a random full-size SD-Turbo-architecture pipeline (out/model, out/taesd) and "
                         "diffusers' pipelines on it at 512x512 on the GPU (out/pipelines.*)")
    ap.add_argument("--weights-only", action="store_true", help="with --full: the model and TAESD, no pipelines")
    a = ap.parse_args()
    tiny_sd, out = a.tiny_sd, a.out
    os.makedirs(out, exist_ok=True)
    diffusers_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __import__("diffusers").__file__))))
    if a.full:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        gen = torch.Generator().manual_seed(17)
        write_full_size(out, a.full, gen, a.arch, diffusers_root)
        if not a.weights_only:
            export_pipelines(os.path.join(out, "model"), os.path.join(out, "taesd"), out, gen, image_size=512,
                             runs=SD15_RUNS if a.arch == "sd15" else FULL_RUNS, device="cuda")
        with open(os.path.join(out, "log.txt"), "w") as f:
            f.write("\n".join(LOG) + "\n")
        return
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(16)
    for step in (lambda: export_autoencoders(tiny_sd, out, gen), lambda: export_schedulers(out, gen),
                 lambda: export_pipelines(tiny_sd, os.path.join(out, "tiny_taesd"), out, gen),
                 lambda: export_lora(tiny_sd, out, gen),
                 lambda: export_single_files(tiny_sd, out, diffusers_root)):
        try:
            step()
        except Exception as e:  # noqa: BLE001
            log(f"FAILED {e!r}")
            log(traceback.format_exc())
    with open(os.path.join(out, "log.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")


if __name__ == "__main__":
    main()
