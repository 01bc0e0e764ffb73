"""Self-check of the reference: run with `python3 tools/reference/check_reference.py`; exits 1 on failure.

(a) UNet's exported tensors equal, by name and shape, the list in docs/model-format.md, generated here
    independently from the doc's text (tiny configs, assets/default, and the SD 2.1 and SD 1.5 U-Nets,
    whose parameter counts must be diffusers' UNet2DConditionModel's);
(b) folding eval-mode BatchNorm and FiLM into per-channel conv scale/bias, as the engine does
    (kernels/embedding.h FilmParams), gives the same output as ResnetBatch;
(c) st_io writes what it reads back, in the layout the safetensors format prescribes.
"""
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402
from export_golden import TINY_BATCH, TINY_GROUP, randomize_norms  # noqa: E402
from unet import BATCH_NORM_EPS, ResnetBatch, empty_model  # noqa: E402

ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../assets")
DEFAULT_CONFIG = os.path.join(ASSETS, "default/config.json")
# Parameters of diffusers' UNet2DConditionModel for stable-diffusion-2-1 and stable-diffusion-v1-5.
SD_PARAMETERS = {"sd21": 865_910_724, "sd15": 859_520_964}


def doc_tensors(cfg):
    """name -> shape, transcribed from docs/model-format.md ("Parameters" and "Skip connections")."""
    c = cfg["block_out_channels"]
    levels, n, T = len(c), cfg["layers_per_block"], 4 * c[0]
    ctx = cfg.get("cross_attention_dim", 0)
    out = {}

    def both(name, weight_shape, channels):
        out[name + ".weight"] = tuple(weight_shape)
        out[name + ".bias"] = (channels,)

    def resnet(p, cin, cout):
        if cfg["norm"] == "group":
            both(p + "norm1", (cin,), cin)
            both(p + "conv1", (cout, cin, 3, 3), cout)
            both(p + "time_emb_proj", (cout, T), cout)
            both(p + "norm2", (cout,), cout)
            both(p + "conv2", (cout, cout, 3, 3), cout)
        else:
            out[p + "conv1.weight"] = (cout, cin, 3, 3)
            out[p + "conv2.weight"] = (cout, cout, 3, 3)
            for norm in ("norm1", "norm2"):
                for field in ("weight", "bias", "running_mean", "running_var"):
                    out[f"{p}{norm}.{field}"] = (cout,)
            both(p + "time_emb_proj", (2 * cout, T), 2 * cout)
        if cin != cout:
            both(p + "conv_shortcut", (cout, cin, 1, 1), cout)

    def transformer(p, ch):
        both(p + "norm", (ch,), ch)
        proj = (ch, ch) if cfg.get("use_linear_projection", True) else (ch, ch, 1, 1)
        both(p + "proj_in", proj, ch)
        both(p + "proj_out", proj, ch)
        for k in range(cfg.get("transformer_layers_per_block", 1)):
            b = f"{p}transformer_blocks.{k}."
            attns = [("norm1", "attn1", ch)] + ([("norm2", "attn2", ctx)] if ctx > 0 else [])
            for norm, attn, kv_width in attns:
                both(b + norm, (ch,), ch)
                out[b + attn + ".to_q.weight"] = (ch, ch)
                out[b + attn + ".to_k.weight"] = (ch, kv_width)
                out[b + attn + ".to_v.weight"] = (ch, kv_width)
                both(b + attn + ".to_out.0", (ch, ch), ch)
            both(b + "norm3", (ch,), ch)
            both(b + "ff.net.0.proj", (8 * ch, ch), 8 * ch)
            both(b + "ff.net.2", (ch, 4 * ch), ch)

    both("time_embedding.linear_1", (T, c[0]), T)
    both("time_embedding.linear_2", (T, T), T)
    if cfg.get("num_class_embeds", 0) > 0:
        out["class_embedding.weight"] = (cfg["num_class_embeds"], T)
    both("conv_in", (c[0], cfg["in_channels"], 3, 3), c[0])

    # Walk the channel count h through the net; the skip stack holds the channels of what was pushed.
    h = c[0]
    skips = [h]
    for i in range(levels):
        for j in range(n):
            resnet(f"down_blocks.{i}.resnets.{j}.", h, c[i])
            h = c[i]
            if cfg["attention_levels"][i]:
                transformer(f"down_blocks.{i}.attentions.{j}.", h)
            skips.append(h)
        if i < levels - 1:
            both(f"down_blocks.{i}.downsamplers.0.conv", (h, h, 3, 3), h)
            skips.append(h)
    resnet("mid_block.resnets.0.", h, h)
    resnet("mid_block.resnets.1.", h, h)
    if cfg["mid_attention"]:
        transformer("mid_block.attentions.0.", h)
    for i in range(levels):
        level = levels - 1 - i
        for j in range(n + 1):
            resnet(f"up_blocks.{i}.resnets.{j}.", h + skips.pop(), c[level])
            h = c[level]
            if cfg["attention_levels"][level]:
                transformer(f"up_blocks.{i}.attentions.{j}.", h)
        if i < levels - 1:
            both(f"up_blocks.{i}.upsamplers.0.conv", (h, h, 3, 3), h)
    assert not skips, "every skip is consumed"
    if cfg["norm"] == "group":
        both("conv_norm_out", (c[0],), c[0])
    both("conv_out", (cfg["out_channels"], c[0], 3, 3), cfg["out_channels"])
    return out


def check_names(label, cfg, parameters=None):
    expected = doc_tensors(cfg)
    actual = {k: tuple(v.shape) for k, v in empty_model(cfg, "meta").export_state().items()}
    missing = sorted(set(expected) - set(actual))
    unknown = sorted(set(actual) - set(expected))
    wrong = sorted(k for k in set(expected) & set(actual) if expected[k] != actual[k])
    problems = [f"missing {k}" for k in missing] + [f"not in doc {k}" for k in unknown] + \
               [f"{k}: doc {expected[k]}, model {actual[k]}" for k in wrong]
    count = sum(math.prod(shape) for shape in actual.values())
    if parameters is not None and count != parameters:
        problems.append(f"{count} parameters, diffusers has {parameters}")
    return f"(a) names and shapes, {label}: {len(actual)} tensors, {count} parameters", problems


def check_batchnorm_folding():
    torch.manual_seed(1)
    block = ResnetBatch(16, 24, 64)
    randomize_norms(block, torch.Generator().manual_seed(2))
    block = block.double().eval()
    x = torch.randn(2, 16, 9, 7, dtype=torch.float64)
    emb = torch.randn(2, 64, dtype=torch.float64)

    def fold(norm):  # BatchNorm(y) = y * s + t per channel
        s = norm.weight / torch.sqrt(norm.running_var + BATCH_NORM_EPS)
        return s, norm.bias - norm.running_mean * s

    with torch.no_grad():
        g, b = block.time_emb_proj(F.silu(emb)).chunk(2, dim=1)  # (B, out) each
        s1, t1 = fold(block.norm1)
        scale, bias = s1 * (1 + g), t1 * (1 + g) + b              # FiLM epilogue, (B, out)
        h = F.silu(F.conv2d(x, block.conv1.weight, padding=1) * scale[:, :, None, None] + bias[:, :, None, None])
        s2, t2 = fold(block.norm2)
        folded_w2 = block.conv2.weight * s2[:, None, None, None]  # scale folded into the weights
        h = F.silu(F.conv2d(h, folded_w2, t2, padding=1)) + block.conv_shortcut(x)
        err = (h - block(x, emb)).abs().max().item()
    return f"(b) BatchNorm + FiLM folding: max |diff| {err:.1e}", [] if err < 1e-12 else [f"diff {err}"]


def check_st_io_round_trip():
    rng = np.random.default_rng(3)
    tensors = {
        "f32": rng.standard_normal((2, 3, 5)).astype(np.float32),
        "f16": rng.standard_normal((7,)).astype(np.float16),  # 14 bytes: later offsets are not aligned
        "f64": rng.standard_normal((1, 1)),
        "i32": np.array([1, -4, 2**31 - 1], dtype=np.int32),
        "i64": np.array([[-(2**40)]], dtype=np.int64),
        "u8": np.arange(5, dtype=np.uint8),
        "flag": np.array([True, False]),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    metadata = {"layout": "NHWC"}
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "round_trip.safetensors")
        st_io.write(path, tensors, metadata)
        back, back_metadata = st_io.read(path)
        with open(path, "rb") as f:
            raw = f.read()
        try:  # where the safetensors package exists (the GPU machine), it must read our file too
            from safetensors.numpy import load_file
            problems += [f"safetensors package reads {k} differently" for k, v in load_file(path).items()
                         if not np.array_equal(v, tensors[k])]
        except ImportError:
            pass
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + header_len])
    offsets = [header[k]["data_offsets"] for k in tensors]
    if header_len % 8:
        problems.append(f"header length {header_len} is not a multiple of 8")
    if offsets[0][0] != 0 or any(a[1] != b[0] for a, b in zip(offsets, offsets[1:])) or \
            8 + header_len + offsets[-1][1] != len(raw):
        problems.append(f"data not contiguous in header order: {offsets}")
    if list(back) != list(tensors) or back_metadata != metadata:
        problems.append("names, order or metadata differ")
    problems += [f"{k} differs" for k in tensors
                 if back[k].dtype != tensors[k].dtype or not np.array_equal(back[k], tensors[k])]
    return f"(c) st_io round trip: {len(tensors)} tensors, {len(raw)} bytes", problems


def main():
    checks = [check_names("tiny_batch", TINY_BATCH), check_names("tiny_group", TINY_GROUP)]
    if os.path.exists(DEFAULT_CONFIG):
        with open(DEFAULT_CONFIG) as f:
            checks.append(check_names("assets/default", json.load(f)))
    for name, parameters in SD_PARAMETERS.items():
        with open(os.path.join(ASSETS, name, "config.json")) as f:
            checks.append(check_names(f"assets/{name}", json.load(f), parameters))
    checks += [check_batchnorm_folding(), check_st_io_round_trip()]
    failed = False
    for title, problems in checks:
        print(("FAIL " if problems else "ok   ") + title)
        for problem in problems:
            print("     " + problem)
        failed = failed or bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
