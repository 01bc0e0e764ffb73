"""diffusers' EulerAncestralDiscreteScheduler step by step, for rtvd's euler_a sampler (tests/sampler_test.cpp).

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_euler_ancestral.py [OUT_JSON]

OUT_JSON defaults to tests/data/sd_refs/euler_ancestral.json. CPU only, a few seconds.

The scheduler runs as StableDiffusionXLPipeline and StableDiffusionXLImg2ImgPipeline (and the SD pipelines,
which do the same) run it, for SD's and SDXL-Turbo's training schedule (scaled_linear 0.00085 to 0.012, 1000
steps, steps_offset 1): every timestep spacing ("trailing" is SDXL-Turbo's and SD-Turbo's), epsilon and
v_prediction, 1, 2 and 4 steps, txt2img (strength 1) and img2img (0.5, and 0.75 at 4 steps; the img2img
pipeline's own get_timesteps truncates the schedule and sets the scheduler's begin index). Per case: the
config, the timesteps, sigmas and init_noise_sigma, the start sample (noise * init_noise_sigma, or add_noise of
a random image latent at the first timestep that runs), then per step the U-Net's input (scale_model_input), a
random model output, the noise the step added and the scheduler's prev_sample.

The noise: step() draws it itself, with randn_tensor and the generator it is given. This script lets it draw
(a seeded generator per case) and records what randn_tensor returned, by wrapping the scheduler module's
randn_tensor; rtvd's test applies its step to that recorded noise. step() draws at every step, the last one
included, where sigma_up is 0 and the noise does not reach prev_sample. Tensors are (1, 4, 2, 2), flattened
NCHW, written with 9 significant digits (an fp32 value read back to double and rounded to fp32 is the same).
A case whose img2img keeps no step (int(steps * strength) = 0) has empty timesteps: rtvd must refuse it.
"""
import json
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_sd_references import RecordNoise  # noqa: E402

BETAS = dict(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, num_train_timesteps=1000,
             steps_offset=1)
SHAPE = (1, 4, 2, 2)


def number(v):
    return float(f"{float(v):.9g}")


def flat(t):
    return [number(v) for v in t.detach().double().flatten()]


def trace(spacing, prediction, steps, strength, gen):
    from diffusers import EulerAncestralDiscreteScheduler, StableDiffusionXLImg2ImgPipeline
    s = EulerAncestralDiscreteScheduler(timestep_spacing=spacing, prediction_type=prediction, **BETAS)
    s.set_timesteps(steps)
    case = dict(sampler="euler_a", timestep_spacing=spacing, prediction_type=prediction, steps=steps,
                strength=strength, config={k: v for k, v in s.config.items() if not k.startswith("_")},
                init_noise_sigma=number(s.init_noise_sigma), sigmas=[number(v) for v in s.sigmas])
    noise = torch.randn(*SHAPE, generator=gen)
    if strength < 1:
        pipe = types.SimpleNamespace(scheduler=s)
        timesteps, _ = StableDiffusionXLImg2ImgPipeline.get_timesteps(pipe, steps, strength, "cpu")
        image_latent = torch.randn(*SHAPE, generator=gen)
        case["image_latent"] = flat(image_latent)
        if len(timesteps) == 0:  # img2img keeps no step: diffusers runs nothing
            case.update(timesteps=[], noise=flat(noise), start=[], steps_trace=[])
            return case
        sample = s.add_noise(image_latent, noise, timesteps[:1])
    else:
        timesteps = s.timesteps
        sample = noise * s.init_noise_sigma
    case["timesteps"] = [float(t) for t in timesteps]  # exact: rtvd's timesteps must equal them
    case["noise"], case["start"] = flat(noise), flat(sample)
    case["steps_trace"] = []
    step_gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
    with RecordNoise("diffusers.schedulers.scheduling_euler_ancestral_discrete") as record:
        for t in timesteps:
            model_in = s.scale_model_input(sample, t)
            model_out = torch.randn(*SHAPE, generator=gen)
            drawn = len(record.drawn)
            sample = s.step(model_out, t, sample, generator=step_gen).prev_sample
            if len(record.drawn) != drawn + 1:
                raise RuntimeError(f"step at t = {float(t)} drew {len(record.drawn) - drawn} noise tensors, not 1")
            case["steps_trace"].append(dict(timestep=float(t), model_input=flat(model_in),
                                            model_output=flat(model_out), injected_noise=flat(record.drawn[-1]),
                                            prev_sample=flat(sample)))
    return case


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "data", "sd_refs", "euler_ancestral.json")
    import diffusers
    gen = torch.Generator().manual_seed(20261128)
    cases = []
    for spacing in ("trailing", "leading", "linspace"):
        for prediction in ("epsilon", "v_prediction"):
            for steps in (1, 2, 4):
                for strength in (1.0, 0.5) + ((0.75,) if steps == 4 else ()):
                    cases.append(trace(spacing, prediction, steps, strength, gen))
    with open(out, "w") as f:
        json.dump({"diffusers": diffusers.__version__, "torch": torch.__version__, "cases": cases}, f)
    print(f"{out}: {len(cases)} cases, {os.path.getsize(out)} bytes (diffusers {diffusers.__version__}, "
          f"torch {torch.__version__})")


if __name__ == "__main__":
    main()
