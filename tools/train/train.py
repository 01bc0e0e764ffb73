"""Trains rtvd's default class-conditional U-Net on the emoji set, in wall-clock chunks.

    python3 tools/train/train.py --minutes 8 --out .device/ckpt [--resume .device/ckpt]

Rectified flow (flow.py), AdamW with linear warmup then a constant rate (the number of chunks is not
known in advance, and the EMA does the averaging a decay would), bf16 autocast and channels_last on
CUDA, EMA of the weights. Each chunk ends with the held-out validation loss of the raw model and of the
BatchNorm-recalibrated EMA model, appended with the chunk's training log to OUT/log.json, and a
checkpoint (checkpoint.py) that the next chunk resumes from.
"""
import argparse
import json
import math
import pathlib
import platform
import time

import torch
import torch.nn.functional as F

import checkpoint
import flow
from bn_calibration import recalibrate_on_training_data
from dataset import EmojiData
from ema import EMA, DECAY
from reference import UNet

REPO = pathlib.Path(__file__).resolve().parents[2]
WEIGHT_DECAY = 0.01
GRAD_CLIP = 1.0
CALIBRATION_SEED = 99


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, required=True, help="wall-clock budget of the training loop")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="checkpoint directory to write")
    parser.add_argument("--resume", type=pathlib.Path, help="checkpoint directory to continue from")
    parser.add_argument("--config", type=pathlib.Path, default=REPO / "assets/default/config.json",
                        help="architecture of a new run; a resumed run keeps its checkpoint's")
    parser.add_argument("--data", type=pathlib.Path, default=REPO / ".device/data/emoji64.npz")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=6e-4)
    parser.add_argument("--warmup", type=int, default=500, help="steps of linear learning-rate warmup")
    parser.add_argument("--log-every", type=int, default=100, help="steps between training-loss entries")
    parser.add_argument("--calibration-batches", type=int, default=50,
                        help="training batches that recalibrate the EMA's BatchNorm before validation")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_optimizer(model, lr):
    """AdamW; weight decay on conv and linear weights only. Biases, norms and the class table stay
    undecayed: decay would shrink the rows of rarely drawn classes between their gradients."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim >= 2 and not name.startswith("class_embedding") else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.999))


def check_classes(cfg, data):
    if cfg.get("class_names") != data.class_names or cfg["num_class_embeds"] != data.null_class + 1:
        raise SystemExit(f"config classes {cfg.get('class_names')} ({cfg['num_class_embeds']} embeds) "
                         f"do not match the dataset's {data.class_names} + null")


def settings(args, device):
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"
    return {"batch": args.batch, "lr": args.lr, "warmup": args.warmup, "weight_decay": WEIGHT_DECAY,
            "grad_clip": GRAD_CLIP, "ema_decay": DECAY, "t_sampling": "logit-normal(0, 1)",
            "label_dropout": flow.LABEL_DROPOUT, "autocast": "bf16" if device.type == "cuda" else "none",
            "device": name, "torch": torch.__version__}


def train_chunk(args, model, ema, optimizer, data, state, device):
    """Steps until the time budget is spent (at least one step); returns the loss entries logged on
    the way and the seconds spent."""
    generator = torch.Generator(device).manual_seed(args.seed * 1_000_003 + state["step"])
    entries, loss_sum, since_log = [], torch.zeros((), device=device), 0

    def log_entry():
        loss = loss_sum.item() / since_log
        if not math.isfinite(loss):  # stop before a diverged model can overwrite a good checkpoint
            raise SystemExit(f"training loss is {loss} at step {state['step']}; no checkpoint written")
        return {"step": state["step"], "loss": loss,
                "lr": optimizer.param_groups[0]["lr"], "seconds": round(time.time() - start, 1)}

    start = time.time()
    while time.time() - start < args.minutes * 60:
        warm = min(1.0, (state["step"] - state["optimizer_start_step"] + 1) / args.warmup)
        for group in optimizer.param_groups:
            group["lr"] = args.lr * warm
        x_t, t, labels, target = flow.training_inputs(data, args.batch, generator)
        with flow.autocast(device):
            v = model(x_t, t, labels)
        loss = F.mse_loss(v.float(), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        ema.update(state["step"])
        state["step"] += 1
        loss_sum += loss.detach()  # summed on the device: .item() every step would stall the GPU queue
        since_log += 1
        if state["step"] % args.log_every == 0:
            entries.append(log_entry())
            print(f"step {state['step']}  loss {entries[-1]['loss']:.4f}  {entries[-1]['seconds']:.0f} s")
            loss_sum.zero_()
            since_log = 0
    if device.type == "cuda":
        torch.cuda.synchronize()
    if since_log:
        entries.append(log_entry())
    return entries, time.time() - start


def evaluate(args, model, ema, data):
    """Validation losses of the raw model (its own running statistics) and of the EMA model, whose
    BatchNorm statistics are recalibrated first; the checkpoint keeps them, so samples drawn from it
    need no dataset, and the EMA goes on averaging from there when the run resumes."""
    model.eval()
    raw_loss, _ = flow.validation_loss(model, data)
    model.train()
    recalibrate_on_training_data(ema.model, data, args.calibration_batches, args.batch, CALIBRATION_SEED)
    ema_loss, ema_by_t = flow.validation_loss(ema.model, data)
    return raw_loss, ema_loss, ema_by_t


def main():
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True  # fixed shapes: autotuned conv algorithms pay off at once
    torch.manual_seed(args.seed)  # parameter init of a new run

    cfg = checkpoint.read_state(args.resume)["config"] if args.resume else json.loads(args.config.read_text())
    data = EmojiData(args.data, device)
    check_classes(cfg, data)
    model = UNet(cfg).to(device, memory_format=torch.channels_last).train()
    ema = EMA(model)
    optimizer = make_optimizer(model, args.lr)
    if args.resume:
        state, log = checkpoint.load(args.resume, model, ema, optimizer)
    else:
        state = {"step": 0, "optimizer_start_step": 0, "config": cfg}
        log = {"parameters": model.parameter_count(), "chunks": []}

    first_step = state["step"]
    entries, seconds = train_chunk(args, model, ema, optimizer, data, state, device)
    raw_loss, ema_loss, ema_by_t = evaluate(args, model, ema, data)
    log["chunks"].append({
        "steps": [first_step, state["step"]], "seconds": round(seconds, 1),
        "steps_per_second": round((state["step"] - first_step) / seconds, 3),
        "settings": settings(args, device),
        "train_loss": entries[-1]["loss"],
        "val_loss_model": raw_loss, "val_loss_ema": ema_loss,
        "val_times": flow.VAL_TIMES, "val_loss_ema_by_t": ema_by_t, "train": entries})
    checkpoint.save(args.out, model, ema, optimizer, state, log)
    chunk = log["chunks"][-1]
    print(f"chunk {len(log['chunks'])}: steps {first_step}->{state['step']} in {seconds:.0f} s "
          f"({chunk['steps_per_second']} steps/s), train loss {chunk['train_loss']:.4f}, "
          f"val loss model {raw_loss:.4f}, EMA {ema_loss:.4f}")


if __name__ == "__main__":
    main()
