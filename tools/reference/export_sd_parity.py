"""On the GPU machine: the full-size SD U-Nets with random weights, and PyTorch's output, for rtvd to match.

    python3 tools/reference/export_sd_parity.py OUT_DIR [--models sd21,sd15] [--batch 2] [--seed 0]

For each model, OUT_DIR/<model>/ gets config.json (assets/<model>/config.json), weights.safetensors
(fp16, ~1.7 GB: never commit it) and io.safetensors: a random latent x (B, 64, 64, 4) NHWC, flow time t
(B,), context (B, 77, D) — inputs rounded to fp16, the precision rtvd stores them in — and v, the
reference velocity: PyTorch in fp32 (TF32 off) from the same fp16 weights, NHWC; v_half is PyTorch's own
fp16 output (SDPA attention), for the scale of fp16 error. The weights come from random_weights.py,
the generator rtvd shares (`rtvd bench unet` without --weights makes the same ones). Then:

    RTVD_SD_PARITY_DIR=OUT_DIR tests/unet_sd_cuda_test     (relative L2 <= 1e-2 per kernel family)
"""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import random_weights  # noqa: E402
import st_io  # noqa: E402
from unet import empty_model  # noqa: E402

ASSETS = os.path.join(HERE, "..", "..", "assets")
FLOW_TIME = 0.5


def config(name):
    with open(os.path.join(ASSETS, name, "config.json")) as f:
        return json.load(f)


def rel_l2(a, b):
    return float(np.linalg.norm((a - b).ravel()) / np.linalg.norm(b.ravel()))


def nhwc(t):
    return t.permute(0, 2, 3, 1).float().cpu().numpy()


def inputs(cfg, batch, seed):
    """x (B, C, H, W), t (B,), context (B, L, D): x and context fp16, the precision rtvd stores them in."""
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, cfg["in_channels"], cfg["sample_size"], cfg["sample_size"], generator=gen).half()
    context = torch.randn(batch, cfg["context_length"], cfg["cross_attention_dim"], generator=gen).half()
    return x, torch.full((batch,), FLOW_TIME), context


def reference(cfg, weights, x, t, context, device):
    """The velocity in fp32 (no TF32) from the given weights, and the model for further use."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = empty_model(cfg, device).eval()
    model.import_state({k: v.astype(np.float32) for k, v in weights.items()})
    with torch.no_grad():
        return model(x.float().to(device), t.to(device), None, context.float().to(device)), model


def export(out_dir, name, batch, seed):
    cfg = config(name)
    model_dir = os.path.join(out_dir, name)
    os.makedirs(model_dir, exist_ok=True)
    shutil.copyfile(os.path.join(ASSETS, name, "config.json"), os.path.join(model_dir, "config.json"))

    start = time.time()
    shapes = {k: tuple(v.shape) for k, v in empty_model(cfg, "meta").export_state().items()}
    weights = random_weights.state_dict(seed, shapes, np.float16)
    st_io.write(os.path.join(model_dir, "weights.safetensors"), weights,
                metadata={"source": "tools/reference/export_sd_parity.py", "seed": str(seed)})
    made = time.time() - start

    x, t, context = inputs(cfg, batch, seed)
    v, model = reference(cfg, weights, x, t, context, "cuda")
    model = model.half()
    model.use_sdpa()
    with torch.no_grad():
        v_half = model(x.cuda(), t.cuda(), None, context.cuda())

    io = {"x": nhwc(x), "t": t.numpy(), "context": context.float().numpy(), "v": nhwc(v), "v_half": nhwc(v_half)}
    st_io.write(os.path.join(model_dir, "io.safetensors"), io,
                metadata={"layout": "NHWC", "computed_in": "float32 (TF32 off)", "weights_seed": str(seed),
                          "source": "tools/reference/export_sd_parity.py"})
    finite = bool(np.isfinite(io["v"]).all() and np.isfinite(io["v_half"]).all())
    print(f"{model_dir}: {sum(w.size for w in weights.values())} parameters in {made:.1f} s; v rms "
          f"{np.sqrt((io['v'] ** 2).mean()):.4f}, PyTorch fp16 vs fp32 relative L2 {rel_l2(io['v_half'], io['v']):.2e}"
          f"{'' if finite else ', NOT FINITE'}")
    return finite


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--models", default="sd21,sd15")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ok = all([export(args.out_dir, name, args.batch, args.seed) for name in args.models.split(",")])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
