"""Writes the tiny random-weight models and golden outputs that the C++ engine is tested against.

    python3 tools/reference/export_golden.py [out_dir]     (default tests/data)

Each model directory gets config.json, weights.safetensors (float32) and golden.safetensors: inputs and
the reference velocity at two frame sizes (keys x, t, ..., v and x2, t2, ..., v2), NHWC like the
engine. The model runs in float64 and the results are stored as float32. Every parameter, BatchNorm
running statistic and norm affine is random, so that folding and every bias are really exercised.
A fixed seed makes reruns byte-identical.

The SD-class models at a scaled-down width (sd21_small, sd15_small: the structure of the SD 2.1 and 1.5
U-Nets, 4 levels, cross-attention over 77 tokens) get no weights file: their weights come from the
counter-based generator (random_weights.py), which the engine reproduces bit for bit, and the golden's
metadata names its seed. random_weights.safetensors holds the first values of a few generated tensors,
full-size SD ones included, so that a difference between the two generators shows as itself.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import random_weights  # noqa: E402
import st_io  # noqa: E402
from unet import UNet  # noqa: E402

TINY_BATCH = {
    "name": "tiny_batch (random weights, test only)",
    "dtype": "float32",
    "sample_size": 16,
    "in_channels": 3,
    "out_channels": 3,
    "block_out_channels": [8, 16],
    "layers_per_block": 1,
    "norm": "batch",
    "norm_num_groups": 4,
    "norm_eps": 1e-5,
    "attention_levels": [False, True],
    "mid_attention": True,
    "attention_head_dim": 8,
    "cross_attention_dim": 0,
    "use_linear_projection": True,
    "num_class_embeds": 5,
    "class_names": ["circle", "square", "triangle", "star"],
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "timestep_scale": 1000,
}

TINY_GROUP = {
    "name": "tiny_group (random weights, test only)",
    "dtype": "float32",
    "sample_size": 8,
    "in_channels": 4,
    "out_channels": 4,
    "block_out_channels": [8, 16],
    "layers_per_block": 1,
    "norm": "group",
    "norm_num_groups": 4,
    "norm_eps": 1e-5,
    "attention_levels": [True, True],
    "mid_attention": True,
    "num_attention_heads": 2,
    "cross_attention_dim": 24,
    "context_length": 7,
    "use_linear_projection": False,
    "num_class_embeds": 0,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "timestep_scale": 1000,
}

# The SD 2.1 U-Net (fixed head dim, linear projections) and the SD 1.5 U-Net (fixed head count, conv
# projections) at a tenth of the width: same levels, attention levels, mid attention, context length.
SD21_SMALL = {
    "name": "sd21_small (SD 2.1 structure at 1/10 width, random weights, test only)",
    "dtype": "float32",
    "sample_size": 16,
    "in_channels": 4,
    "out_channels": 4,
    "block_out_channels": [32, 64, 64, 64],
    "layers_per_block": 2,
    "norm": "group",
    "norm_num_groups": 8,
    "norm_eps": 1e-5,
    "attention_levels": [True, True, True, False],
    "mid_attention": True,
    "attention_head_dim": 8,
    "transformer_layers_per_block": 1,
    "cross_attention_dim": 64,
    "context_length": 77,
    "use_linear_projection": True,
    "num_class_embeds": 0,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "timestep_scale": 1000,
}

# Two heads whose dim doubles per level and is no power of two (24/48/48, as SD 1.5's 40/80/160).
SD15_SMALL = dict(SD21_SMALL, name="sd15_small (SD 1.5 structure at 1/7 width, random weights, test only)",
                  block_out_channels=[48, 96, 96, 96], num_attention_heads=2, cross_attention_dim=48,
                  use_linear_projection=False)
del SD15_SMALL["attention_head_dim"]

# Per model: the two frame sizes (H, W), the second non-square to catch H/W mix-ups, and one flow time
# each. Both images of a batch share t, as in the engine (one timestep per denoising step).
CASES = {
    "tiny_batch": (TINY_BATCH, [(16, 16), (24, 16)], [0.75, 0.3]),
    "tiny_group": (TINY_GROUP, [(8, 8), (8, 16)], [0.6, 0.15]),
}
GENERATED_CASES = {
    "sd21_small": (SD21_SMALL, [(16, 16), (8, 24)], [0.7, 0.2]),
    "sd15_small": (SD15_SMALL, [(16, 16), (24, 8)], [0.45, 0.9]),
}
BATCH = 2
SEED = 20261121
WEIGHTS_SEED = 6  # of the generated weights, in each generated golden's metadata

# Tensors whose first SAMPLE_VALUES generated values random_weights.safetensors holds: (config, name, dtype).
SAMPLED = [
    (SD21_SMALL, "down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight", np.float32),
    (SD15_SMALL, "mid_block.resnets.1.norm2.weight", np.float32),
    (SD15_SMALL, "up_blocks.3.resnets.0.conv1.bias", np.float32),
    ("sd21", "up_blocks.0.resnets.0.conv1.weight", np.float16),  # values down to fp16 subnormals
    ("sd15", "down_blocks.0.attentions.1.proj_in.weight", np.float16),
]
SAMPLE_VALUES = 4096


def randomize_norms(model, gen):
    """Moves every norm off its identity init: BatchNorm affine and running stats, GroupNorm and
    LayerNorm affine. Linear/conv biases are already random under PyTorch's default init."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.BatchNorm2d, torch.nn.GroupNorm, torch.nn.LayerNorm)):
                module.weight.copy_(1 + 0.3 * torch.randn(module.weight.shape, generator=gen))
                module.bias.copy_(0.3 * torch.randn(module.bias.shape, generator=gen))
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.copy_(0.3 * torch.randn(module.running_mean.shape, generator=gen))
                module.running_var.copy_(0.5 + 1.5 * torch.rand(module.running_var.shape, generator=gen))


def golden_case(model, cfg, size, t_value, suffix, gen):
    """Random inputs at size (H, W) and the model's velocity, as float32 NHWC arrays keyed with suffix."""
    height, width = size
    # Inputs are drawn in float32, the precision they are stored in, so v is exact for what is stored.
    x = torch.randn(BATCH, cfg["in_channels"], height, width, generator=gen)
    t = torch.full((BATCH,), t_value)
    stored = {"x": x.permute(0, 2, 3, 1), "t": t}               # x as (B, H, W, C_in)
    class_labels = context = None
    if cfg.get("num_class_embeds", 0) > 0:
        null_class = cfg["num_class_embeds"] - 1
        class_labels = torch.tensor([1, null_class])            # a class, and the null class
        stored["class_labels"] = class_labels.to(torch.int32)
    if cfg.get("cross_attention_dim", 0) > 0:
        context = torch.randn(BATCH, cfg["context_length"], cfg["cross_attention_dim"], generator=gen)
        stored["context"] = context
    with torch.no_grad():
        v = model(x.double(), t.double(), class_labels, None if context is None else context.double())
    stored["v"] = v.permute(0, 2, 3, 1).float()                 # (B, H, W, C_out)
    return {key + suffix: value.contiguous().numpy() for key, value in stored.items()}


def export_case(out_dir, name, cfg, sizes, times, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # PyTorch's default parameter init draws from the global generator
    model = UNet(cfg)
    randomize_norms(model, gen)
    # Built in float32, so the float64 run uses exactly the values weights.safetensors holds.
    model = model.double().eval()

    model_dir = write_config_and_golden(out_dir, name, model, cfg, sizes, times, gen, {})
    weights = {k: v.float().numpy() for k, v in model.export_state().items()}
    st_io.write(os.path.join(model_dir, "weights.safetensors"), weights)
    return model


def write_config_and_golden(out_dir, name, model, cfg, sizes, times, gen, metadata):
    """out_dir/name/config.json and golden.safetensors (one case per size); returns the directory."""
    model_dir = os.path.join(out_dir, name)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    golden = {}
    for index, (size, t_value) in enumerate(zip(sizes, times)):
        golden.update(golden_case(model, cfg, size, t_value, "" if index == 0 else str(index + 1), gen))
    st_io.write(os.path.join(model_dir, "golden.safetensors"), golden,
                metadata=dict({"layout": "NHWC", "computed_in": "float64",
                               "source": "tools/reference/export_golden.py"}, **metadata))
    return model_dir


def export_generated_case(out_dir, name, cfg, sizes, times, seed):
    """config.json and golden.safetensors of a model whose weights the engine generates itself."""
    gen = torch.Generator().manual_seed(seed)
    model = UNet(cfg)
    shapes = {k: tuple(v.shape) for k, v in model.export_state().items()}
    model.import_state(random_weights.state_dict(WEIGHTS_SEED, shapes))
    model = model.double().eval()
    write_config_and_golden(out_dir, name, model, cfg, sizes, times, gen,
                            {"weights_seed": str(WEIGHTS_SEED), "weights": "tools/reference/random_weights.py"})
    return model


def export_samples(path):
    """The first SAMPLE_VALUES values of each SAMPLED tensor, with its full shape in the metadata."""
    from check_reference import doc_tensors  # here: check_reference imports this module
    tensors, metadata = {}, {"seed": str(WEIGHTS_SEED), "source": "tools/reference/export_golden.py"}
    for cfg, name, dtype in SAMPLED:
        if isinstance(cfg, str):
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"../../assets/{cfg}/config.json")) as f:
                cfg = json.load(f)
        shape = doc_tensors(cfg)[name]  # from the doc's list: full-size SD models would need 3.5 GB
        values = random_weights.parameter(WEIGHTS_SEED, name, shape, dtype)
        tensors[name] = values.reshape(-1)[:SAMPLE_VALUES]
        metadata["shape." + name] = ",".join(str(d) for d in shape)
    st_io.write(path, tensors, metadata)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    cases = [(export_case, name, case) for name, case in CASES.items()] + \
            [(export_generated_case, name, case) for name, case in GENERATED_CASES.items()]
    for offset, (export, name, (cfg, sizes, times)) in enumerate(cases):
        model = export(out_dir, name, cfg, sizes, times, SEED + offset)
        model_dir = os.path.join(out_dir, name)
        sizes_kb = ", ".join(f"{f} {os.path.getsize(os.path.join(model_dir, f)) / 1024:.1f} KB"
                             for f in sorted(os.listdir(model_dir)))
        print(f"{model_dir}: {model.parameter_count()} parameters; {sizes_kb}")
    samples = os.path.join(out_dir, "random_weights.safetensors")
    export_samples(samples)
    print(f"{samples}: {os.path.getsize(samples) / 1024:.1f} KB")


if __name__ == "__main__":
    main()
