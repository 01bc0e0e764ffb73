"""Checkpoint directory: state.json (step, config, optimizer start), model.pt, ema.pt, adam_v.pt and
log.json (train.py's log of every chunk so far).

Everything that resumes a run must travel to the GPU machine next to the dataset, inside 64 MiB, and
come back in files of at most 16 MiB. So parameters are stored in float16 (a one-off rounding far below
one optimizer step; training goes on in float32) and AdamW keeps only its second moment, in bfloat16
(float16 would flush small squared gradients to zero). The first moment forgets in about 10 steps, so it
restarts at zero. About 7 MB per file for the default model (3.5 M parameters).
"""
import json
import os
import pathlib

import torch

from reference import UNet

STATE, LOG, MODEL, EMA_WEIGHTS, ADAM_V = "state.json", "log.json", "model.pt", "ema.pt", "adam_v.pt"


def _compact(model):
    """state_dict with parameters in float16; BatchNorm buffers stay float32 (tiny, wide range)."""
    parameters = {name for name, _ in model.named_parameters()}
    return {name: value.detach().half().cpu() if name in parameters else value.cpu()
            for name, value in model.state_dict().items()}


def _save(obj, path):
    """Write then rename, so a run killed while saving leaves the previous file whole."""
    partial = path.with_name(path.name + ".partial")
    if path.suffix == ".json":
        partial.write_text(json.dumps(obj, indent=1) + "\n")
    else:
        torch.save(obj, partial)
    os.replace(partial, path)


def read_state(checkpoint_dir):
    return json.loads((pathlib.Path(checkpoint_dir) / STATE).read_text())


def save(out_dir, model, ema, optimizer, state, log):
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _save(_compact(model), out_dir / MODEL)
    _save(_compact(ema.model), out_dir / EMA_WEIGHTS)
    adam_v = {name: optimizer.state[p]["exp_avg_sq"].to(torch.bfloat16).cpu()
              for name, p in model.named_parameters() if p in optimizer.state}
    _save(adam_v, out_dir / ADAM_V)
    _save(log, out_dir / LOG)
    _save(state, out_dir / STATE)


def load(resume_dir, model, ema, optimizer):
    """Loads weights, EMA and, when adam_v.pt is present, AdamW's second moments; returns (state, log).
    Without adam_v.pt the optimizer starts fresh: state["optimizer_start_step"] moves to the current
    step, and train.py warms the learning rate up again from there."""
    resume_dir = pathlib.Path(resume_dir)
    state = read_state(resume_dir)
    log = json.loads((resume_dir / LOG).read_text())
    model.load_state_dict(torch.load(resume_dir / MODEL, map_location="cpu"))
    ema.model.load_state_dict(torch.load(resume_dir / EMA_WEIGHTS, map_location="cpu"))
    if not (resume_dir / ADAM_V).exists():
        state["optimizer_start_step"] = state["step"]
        return state, log
    adam_v = torch.load(resume_dir / ADAM_V, map_location="cpu")
    adam_steps = torch.tensor(float(state["step"] - state["optimizer_start_step"]))
    for name, p in model.named_parameters():
        optimizer.state[p] = {"step": adam_steps.clone(), "exp_avg": torch.zeros_like(p),
                              "exp_avg_sq": adam_v[name].to(device=p.device, dtype=p.dtype)}
    return state, log


def load_ema_model(checkpoint_dir, device):
    """The EMA model in float32 and eval mode, with its config and training state."""
    state = read_state(checkpoint_dir)
    model = UNet(state["config"])
    model.load_state_dict(torch.load(pathlib.Path(checkpoint_dir) / EMA_WEIGHTS, map_location="cpu"))
    return model.to(device).eval(), state
