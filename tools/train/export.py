"""Exports a checkpoint's EMA model as rtvd's default model, with its metrics and a golden test case.

    python3 tools/train/export.py CHECKPOINT_DIR

1. Recalibrates the EMA model's BatchNorm statistics on training batches (bn_calibration.py) and prints
   the eval-vs-train output gap before and after.
2. Writes weights.safetensors in float16 with exactly the tensor names of docs/model-format.md.
3. Writes metrics.json: steps, last training loss, validation loss of the exported float16 weights.
4. Writes the golden case for the C++ engine: x (2, 64, 64, 3) NHWC noise, t, class_labels (a class and
   the null class) and v, computed in float64 from the float16-rounded weights, so that the engine in
   float32 can match it to about 1e-4.
"""
import argparse
import json
import pathlib

import numpy as np
import torch

import flow
from bn_calibration import eval_train_gap, recalibrate_on_training_data
from checkpoint import load_ema_model
from dataset import EmojiData
from reference import UNet, st_io

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECK_SEED, CALIBRATION_SEED, GOLDEN_SEED = 5, 6, 20261121
GOLDEN_T = 0.9
GOLDEN_CLASS = 0  # smileys: a class whose samples are recognisable by eye


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=pathlib.Path)
    parser.add_argument("--data", type=pathlib.Path, default=REPO / ".device/data/emoji64.npz")
    parser.add_argument("--calibration-batches", type=int, default=50)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--weights", type=pathlib.Path, default=REPO / "assets/default/weights.safetensors")
    parser.add_argument("--metrics", type=pathlib.Path, default=REPO / "assets/default/metrics.json")
    parser.add_argument("--golden", type=pathlib.Path, default=REPO / "tests/data/default_golden.safetensors")
    return parser.parse_args()


def calibrate(model, data, args):
    """Recalibrates in place; returns the eval-vs-train gap on one fixed batch before and after."""
    generator = torch.Generator(data.train_images.device).manual_seed(CHECK_SEED)
    x_t, t, labels, _ = flow.training_inputs(data, args.batch, generator)
    before = eval_train_gap(model, x_t, t, labels)
    recalibrate_on_training_data(model, data, args.calibration_batches, args.batch, CALIBRATION_SEED)
    after = eval_train_gap(model, x_t, t, labels)
    print(f"eval vs train output, relative difference: {before:.4f} before calibration, {after:.4f} after")
    return before, after


def shipped_model(cfg, weights, dtype):
    """A UNet holding exactly the float16 values written to weights.safetensors, upcast to dtype."""
    model = UNet(cfg)
    state = model.state_dict()
    state.update({name: torch.from_numpy(array.astype(np.float64)) for name, array in weights.items()})
    model.load_state_dict(state)
    return model.to(dtype).eval()


def golden_case(model, cfg):
    """The engine's test case (NHWC, float32 storage) from a float64 run of the shipped weights."""
    generator = torch.Generator().manual_seed(GOLDEN_SEED)
    size = cfg["sample_size"]
    x = torch.randn(2, cfg["in_channels"], size, size, generator=generator)  # drawn in float32, as stored
    t = torch.full((2,), GOLDEN_T)
    labels = torch.tensor([GOLDEN_CLASS, cfg["num_class_embeds"] - 1])
    with torch.no_grad():
        v = model(x.double(), t.double(), labels)
    return {"x": x.permute(0, 2, 3, 1).contiguous().numpy(),                # (2, H, W, 3)
            "t": t.numpy(),
            "class_labels": labels.to(torch.int32).numpy(),
            "v": v.permute(0, 2, 3, 1).float().contiguous().numpy()}        # (2, H, W, 3)


def main():
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, state = load_ema_model(args.checkpoint, device)
    cfg = state["config"]
    data = EmojiData(args.data, device)
    gap_before, gap_after = calibrate(model, data, args)

    weights = {name: value.half().cpu().numpy() for name, value in model.export_state().items()}
    st_io.write(args.weights, weights)

    val_loss, val_by_t = flow.validation_loss(shipped_model(cfg, weights, torch.float32).to(device), data)
    chunks = json.loads((args.checkpoint / "log.json").read_text())["chunks"]
    metrics = {
        "steps": state["step"], "chunks": len(chunks),
        "train_seconds": round(sum(chunk["seconds"] for chunk in chunks), 1),
        "final_train_loss": chunks[-1]["train_loss"],
        "val_loss": val_loss, "val_times": flow.VAL_TIMES, "val_loss_by_t": val_by_t,
        "eval_train_gap": {"before_calibration": gap_before, "after_calibration": gap_after},
        "calibration": {"batches": args.calibration_batches, "batch": args.batch},
        "settings": chunks[-1]["settings"],
    }
    args.metrics.write_text(json.dumps(metrics, indent=1) + "\n")

    golden = golden_case(shipped_model(cfg, weights, torch.float64), cfg)
    st_io.write(args.golden, golden, metadata={"layout": "NHWC", "computed_in": "float64",
                                               "weights": "assets/default/weights.safetensors (float16)",
                                               "source": "tools/train/export.py"})
    print(f"step {state['step']}: val loss {val_loss:.4f}; wrote {args.weights}, {args.metrics}, {args.golden}")


if __name__ == "__main__":
    main()
