"""Writes a randomly initialised (untrained) model: config.json + weights.safetensors in the config's dtype.

    python3 tools/reference/export_random_model.py CONFIG_JSON OUT_DIR [SEED]

PyTorch's default init; BatchNorm keeps its identity affine and running statistics (mean 0, var 1).
Used for placeholder assets (assets/default/) until a trained model replaces them.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402
from unet import UNet  # noqa: E402

NUMPY_DTYPES = {"float16": np.float16, "float32": np.float32}


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    config_path, out_dir = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) == 4 else 0
    with open(config_path) as f:
        cfg = json.load(f)

    torch.manual_seed(seed)
    model = UNet(cfg)
    dtype = NUMPY_DTYPES[cfg["dtype"]]
    weights = {k: v.numpy().astype(dtype) for k, v in model.export_state().items()}

    os.makedirs(out_dir, exist_ok=True)
    out_config = os.path.join(out_dir, "config.json")
    if not os.path.exists(out_config) or not os.path.samefile(config_path, out_config):
        shutil.copyfile(config_path, out_config)  # byte for byte: the config stays as written
    out_weights = os.path.join(out_dir, "weights.safetensors")
    st_io.write(out_weights, weights, metadata={"source": "tools/reference/export_random_model.py",
                                                "seed": str(seed)})
    print(f"{out_weights}: {model.parameter_count()} parameters, {len(weights)} tensors, "
          f"{os.path.getsize(out_weights) / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
