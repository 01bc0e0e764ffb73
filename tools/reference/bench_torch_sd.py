"""PyTorch's side of tools/perf_table.py: one piece of a diffusers SD pipeline, one way of running it, per process.

    PYTHONPATH=<diffusers>/src python3 tools/reference/bench_torch_sd.py WHAT MODEL_DIR --mode eager|graph|compile
        [--taesd DIR] [--controlnet DIR ...] [--batch N] [--size PIXELS] [--runs N] [--json FILE]
        [--ready FILE --go FILE --lock FILE]

MODEL_DIR is a diffusers folder (export_sd_references.py --full writes a random-weight SD-Turbo-architecture one,
export_tiny_sdxl_pipeline.py --full --weights-only an SDXL one: an SDXL U-Net gets its added conditioning, a pooled
text embedding and the time ids (size, size, 0, 0, size, size), as the pipeline gives it);
the weights are read as rtvd reads them, in fp16, on the GPU, channels-last, with SDPA and cuDNN's convolution
autotuning on. WHAT:
  frame       the real-time img2img frame at --size (512) square, as `rtvd bench frames --img2img --steps 2 --strength 0.5
              --guidance 0 --vae TAESD` runs it: an fp32 HWC image in [-1, 1] copied from pinned host memory,
              TAESD's encoder, noise at the step's sigma (Euler, trailing spacing: diffusers' add_noise), the
              U-Net, Euler's step to sigma 0, TAESD's decoder, RGBA8, copied back to pinned host memory; timed
              on the host clock from the upload to the read-back's end, as rtvd's frames are. With --batch K,
              K frames per call (`--stream-batch K` of that frame): K source images uploaded and encoded
              together, the U-Net and TAESD's decoder at batch K, K RGBA8 frames read back; its ms per frame is
              the call's over K. With --controlnet (repeatable), each ControlNetModel runs before the U-Net at
              conditioning scale 1 with the source image (in [0, 1]) as its control image, their residuals summed
              as diffusers' MultiControlNetModel does: PyTorch has no Canny on the GPU, so its frame leaves out the
              preprocessing that rtvd's Canny frame does
  unet        UNet2DConditionModel alone at --batch: latents (N, 4, s, s) at its config's sample_size s, a timestep,
              a context (N, 77, width)
  taesd       AutoencoderTiny's encoder (1, 3, S, S) and decoder (1, 4, S/8, S/8), each timed apart (S = --size)
  vae_decode  AutoencoderKL's decoder (1, 4, S/8, S/8) -> (1, 3, S, S)
  text        CLIPTextModel (transformers, SDPA) at --batch x 77 tokens
Modes: eager; eager captured in one CUDA graph (static inputs, replayed); torch.compile(mode="reduce-overhead")
(Inductor with CUDA graphs). Timing (but frame's): CUDA events around each of --runs calls queued back to back,
after warm-up; the median.

--ready/--go/--lock let tools/perf_table.py build and compile several of these at once and time them one at a
time: after warm-up this writes --ready, waits for --go to exist, and times while holding an exclusive lock on
--lock. Prints one JSON object (also to --json): milliseconds, the steps from process start (compiling
included) and the time to the first output.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch_unet import captured, seconds_since_process_start, step_clock, timed_ms  # noqa: E402 (imports torch)

START_S = seconds_since_process_start()

import argparse  # noqa: E402
import fcntl  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402

CL = torch.channels_last
HALF = torch.float16


def added_conditioning(unet, batch, size, gen):
    """An SDXL U-Net's added_cond_kwargs (a pooled text embedding and the time ids), or {} for SD's."""
    c = unet.config
    if c.addition_embed_type != "text_time":
        return {}
    pooled = c.projection_class_embeddings_input_dim - 6 * c.addition_time_embed_dim
    text_embeds = torch.randn(batch, pooled, generator=gen, device="cuda", dtype=HALF)
    time_ids = torch.tensor([[size, size, 0, 0, size, size]] * batch, device="cuda", dtype=HALF)
    return {"added_cond_kwargs": {"text_embeds": text_embeds, "time_ids": time_ids}}


def load(what, model_dir, taesd_dir, batch, size, controlnet_dirs=()):
    """{name: callable} of the pieces to time, each with its inputs bound; the modules stay alive through them."""
    from diffusers import AutoencoderKL, AutoencoderTiny, ControlNetModel, EulerDiscreteScheduler, UNet2DConditionModel

    def unet_model():
        unet = UNet2DConditionModel.from_pretrained(os.path.join(model_dir, "unet"), torch_dtype=HALF)
        return unet.to("cuda", memory_format=CL).eval()

    def taesd_model():
        return AutoencoderTiny.from_pretrained(taesd_dir, torch_dtype=HALF).to("cuda", memory_format=CL).eval()

    gen = torch.Generator(device="cuda").manual_seed(1)
    if what == "unet":
        unet = unet_model()
        c = unet.config
        x = torch.randn(batch, c.in_channels, c.sample_size, c.sample_size, generator=gen, device="cuda", dtype=HALF)
        x = x.to(memory_format=CL)
        t = torch.full((batch,), 499.0, device="cuda")
        ctx = torch.randn(batch, 77, c.cross_attention_dim, generator=gen, device="cuda", dtype=HALF)
        added = added_conditioning(unet, batch, c.sample_size * 8, gen)
        return {"unet": lambda: unet(x, t, encoder_hidden_states=ctx, **added).sample}
    if what == "taesd":
        taesd = taesd_model()
        image = torch.rand(1, 3, size, size, generator=gen, device="cuda", dtype=HALF).mul(2).sub(1).to(memory_format=CL)
        latent = torch.randn(1, 4, size // 8, size // 8, generator=gen, device="cuda", dtype=HALF).to(memory_format=CL)
        return {"encode": lambda: taesd.encode(image).latents, "decode": lambda: taesd.decode(latent).sample}
    if what == "vae_decode":
        vae = AutoencoderKL.from_pretrained(os.path.join(model_dir, "vae"), torch_dtype=HALF).to("cuda", memory_format=CL).eval()
        latent = torch.randn(1, vae.config.latent_channels, size // 8, size // 8, generator=gen, device="cuda",
                             dtype=HALF).to(memory_format=CL)
        return {"decode": lambda: vae.decode(latent).sample}
    if what == "text":
        from transformers import CLIPTextModel
        text = CLIPTextModel.from_pretrained(os.path.join(model_dir, "text_encoder"), torch_dtype=HALF,
                                             attn_implementation="sdpa").to("cuda").eval()
        ids = torch.randint(0, text.config.vocab_size - 2, (batch, 77), generator=gen, device="cuda")
        return {"forward": lambda: text(ids).last_hidden_state}
    # frame: what rtvd's frame does, from the same scheduler config
    unet, taesd = unet_model(), taesd_model()
    scheduler = EulerDiscreteScheduler.from_pretrained(os.path.join(model_dir, "scheduler"))
    scheduler.set_timesteps(2, device="cuda")
    t, sigma = scheduler.timesteps[1], float(scheduler.sigmas[1])  # strength 0.5 of 2 steps: the second only
    c_in = 1.0 / (sigma * sigma + 1.0) ** 0.5
    ctx = torch.randn(batch, 77, unet.config.cross_attention_dim, generator=gen, device="cuda", dtype=HALF)
    added = added_conditioning(unet, batch, size, gen)
    alpha = torch.full((batch, size, size, 1), 255, device="cuda", dtype=torch.uint8)
    def controlnet_model(d):  # diffusers' fp16 variant name where the folder has it (export_tiny_controlnet's net2)
        fp16 = os.path.exists(os.path.join(d, "diffusion_pytorch_model.fp16.safetensors"))
        return ControlNetModel.from_pretrained(d, torch_dtype=HALF, variant="fp16" if fp16 else None).to(
            "cuda", memory_format=CL).eval()
    nets = [controlnet_model(d) for d in controlnet_dirs]

    def control_residuals(noisy_in, control):
        """The nets' residuals for the U-Net, summed over the nets (diffusers' MultiControlNetModel)."""
        if not nets:
            return {}
        downs, mid = None, None
        for net in nets:
            d, m = net(noisy_in, t, encoder_hidden_states=ctx, controlnet_cond=control, conditioning_scale=1.0,
                       return_dict=False, **added)
            downs = list(d) if downs is None else [a + b for a, b in zip(downs, d)]
            mid = m if mid is None else mid + m
        return {"down_block_additional_residuals": downs, "mid_block_additional_residual": mid}

    def frame(images_nhwc):
        x = images_nhwc.permute(0, 3, 1, 2).to(HALF).contiguous(memory_format=CL)
        latent = taesd.encode(x).latents  # scaling factor 1
        noisy = latent + sigma * torch.randn_like(latent)
        residuals = control_residuals(noisy * c_in, (x + 1) / 2)
        eps = unet(noisy * c_in, t, encoder_hidden_states=ctx, **added, **residuals).sample
        decoded = taesd.decode(noisy - sigma * eps).sample
        rgb = ((decoded.permute(0, 2, 3, 1).float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
        return torch.cat([rgb, alpha], dim=3)
    return {"frame": frame}


def runner(fn, mode, what, batch, size):
    """A call of fn as the mode runs it; for frame, batch whole frames with their upload and read-back."""
    if what != "frame":
        if mode == "compile":
            compiled = torch.compile(fn, mode="reduce-overhead")

            def run():
                torch.compiler.cudagraph_mark_step_begin()  # each call a new step: its CUDA graph replays
                return compiled()
            return run
        if mode == "graph":
            replay, out = captured(fn)

            def run():
                replay()
                return out
            return run
        return fn
    host_image = torch.empty(batch, size, size, 3, dtype=torch.float32).uniform_(-1, 1).pin_memory()
    host_rgba = torch.empty(batch, size, size, 4, dtype=torch.uint8).pin_memory()
    image = torch.empty(batch, size, size, 3, device="cuda")
    if mode == "compile":
        compiled = torch.compile(fn, mode="reduce-overhead")

        def device_part():
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(image)
    elif mode == "graph":
        image.copy_(host_image)
        replay, static_out = captured(lambda: fn(image))

        def device_part():
            replay()
            return static_out
    else:
        def device_part():
            return fn(image)

    def run():
        image.copy_(host_image, non_blocking=True)
        host_rgba.copy_(device_part(), non_blocking=True)
        torch.cuda.current_stream().synchronize()
        return host_rgba
    return run


def wall_ms(run, runs):
    ms = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        ms.append((time.perf_counter() - start) * 1e3)
    return ms


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["frame", "unet", "taesd", "vae_decode", "text"])
    parser.add_argument("model_dir")
    parser.add_argument("--taesd", help="an AutoencoderTiny folder (frame, taesd)")
    parser.add_argument("--controlnet", action="append", default=[], help="a ControlNetModel folder (frame), repeatable")
    parser.add_argument("--mode", choices=["eager", "graph", "compile"], required=True)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--size", type=int, default=512, help="the image's side (frame, taesd, vae_decode)")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json")
    parser.add_argument("--ready")
    parser.add_argument("--go")
    parser.add_argument("--lock")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    steps, step = step_clock(START_S)

    result = {"impl": f"pytorch {args.mode}", "what": args.what, "mode": args.mode, "batch": args.batch, "size": args.size,
              "controlnets": len(args.controlnet),
              "runs": args.runs, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "ms_median": {}}
    with torch.inference_mode():
        pieces = load(args.what, args.model_dir, args.taesd, args.batch, args.size, args.controlnet)
        step("weights")
        runs = {name: runner(fn, args.mode, args.what, args.batch, args.size) for name, fn in pieces.items()}
        for name, run in runs.items():
            out = run()
            torch.cuda.synchronize()
            step(f"first {name}")  # compiling included
            result.setdefault("output_finite", True)
            result["output_finite"] &= bool(torch.isfinite(out.float()).all())
            del out
        result["time_to_first_output_s"] = seconds_since_process_start()
        for run in runs.values():
            for _ in range(args.warmup):
                run()
        torch.cuda.synchronize()
        if args.ready:
            open(args.ready, "w").close()
            while args.go and not os.path.exists(args.go):
                time.sleep(0.05)
        lock = open(args.lock, "w") if args.lock else None
        if lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
        for name, run in runs.items():
            for _ in range(3):
                run()
            if args.what == "frame":  # per frame: a call's time over the frames it brings out
                ms = [call_ms / args.batch for call_ms in wall_ms(run, args.runs)]
            else:
                ms = timed_ms(run, args.runs)
            result["ms_median"][name] = statistics.median(ms)
            result.setdefault("ms_min", {})[name] = min(ms)
        if lock:
            lock.close()
    result["steps_s"] = steps
    result["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
    text = json.dumps(result)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
