"""Writes a PNG grid of EMA samples from a checkpoint: one row per class (in class-id order), Euler
steps with classifier-free guidance, as the engine will render them.

    python3 tools/train/sample_grid.py CHECKPOINT_DIR OUT.png [--per-class 8 --steps 8 --guidance 3]

The checkpoint's EMA BatchNorm statistics are used as saved (train.py recalibrates them at each chunk's end).
"""
import argparse
import pathlib

import numpy as np
import torch
from PIL import Image

import flow
from checkpoint import load_ema_model
from dataset import to_uint8

GAP = 2  # grey pixels between tiles
SEED = 7


def grid_image(tiles):
    """uint8 (rows, columns, H, W, 3) -> one (rows (H + GAP) - GAP, ...) image on grey."""
    rows, columns, height, width, _ = tiles.shape
    canvas = np.full((rows * (height + GAP) - GAP, columns * (width + GAP) - GAP, 3), 128, np.uint8)
    for r in range(rows):
        for c in range(columns):
            top, left = r * (height + GAP), c * (width + GAP)
            canvas[top:top + height, left:left + width] = tiles[r, c]
    return canvas


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--per-class", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--guidance", type=float, default=3.0)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, state = load_ema_model(args.checkpoint, device)
    classes = state["config"]["num_class_embeds"] - 1  # the last embedding is the null class
    labels = torch.arange(classes, device=device).repeat_interleave(args.per_class)
    generator = torch.Generator().manual_seed(SEED)
    x = flow.sample(model, labels, classes, args.steps, args.guidance, generator)
    tiles = to_uint8(x).reshape(classes, args.per_class, *x.shape[2:], 3)
    Image.fromarray(grid_image(tiles)).save(args.out)


if __name__ == "__main__":
    main()
