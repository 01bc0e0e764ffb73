#!/usr/bin/env bash
# One training chunk on the GPU machine: resumes from .device/ckpt/ when it holds a checkpoint, trains
# for MINUTES, then writes to OUT_DIR (default $OUT): ckpt/ (state.json, log.json, model.pt, ema.pt,
# adam_v.pt, each under 15 MB), samples.png (EMA samples, one row per class, 8 Euler steps, guidance 3)
# and train.txt (this run's output). 7 files; the whole run takes about MINUTES + 1 minutes.
#
#   tools/train/device_train.sh MINUTES [OUT_DIR [TRAIN_ARGS...]]
#
# TRAIN_ARGS go to train.py after the defaults (e.g. --lr 3e-4, or a small --batch for a CPU smoke test).
# Needs the carried .device/data/emoji64.npz (tools/train/build_dataset.sh). To continue afterwards,
# copy OUT_DIR/ckpt/ back to .device/ckpt/ and carry both paths again. DATA and RESUME override the two
# paths (CPU smoke tests); PYTHON the interpreter.
set -euo pipefail
export PYTHONUNBUFFERED=1

minutes=${1:?usage: device_train.sh MINUTES [OUT_DIR [TRAIN_ARGS...]]}
out=${2:-${OUT:?OUT_DIR not given and \$OUT not set}}
shift $(($# < 2 ? $# : 2))
PYTHON=${PYTHON:-python3}
repo=$(cd "$(dirname "$0")/../.." && pwd)
data=${DATA:-$repo/.device/data/emoji64.npz}
resume_dir=${RESUME:-$repo/.device/ckpt}

[[ -f $data ]] || { echo "missing $data: run tools/train/build_dataset.sh and carry .device/data" >&2; exit 1; }
resume=()
[[ -f $resume_dir/state.json ]] && resume=(--resume "$resume_dir")

mkdir -p "$out/ckpt"
{
    "$PYTHON" "$repo/tools/train/train.py" --minutes "$minutes" --data "$data" --out "$out/ckpt" \
        "${resume[@]}" "$@"
    "$PYTHON" "$repo/tools/train/sample_grid.py" "$out/ckpt" "$out/samples.png"
} 2>&1 | tee "$out/train.txt"

# Summary last, where the tail of the output shows it; fails if a file would not come back.
"$PYTHON" - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"\n{'chunk':>5} {'steps':>13} {'seconds':>8} {'steps/s':>8} {'train':>7} {'val':>7} {'val EMA':>8}")
for i, c in enumerate(json.loads((out / "ckpt/log.json").read_text())["chunks"], 1):
    print(f"{i:>5} {c['steps'][0]:>6}-{c['steps'][1]:<6} {c['seconds']:>8.0f} {c['steps_per_second']:>8.2f} "
          f"{c['train_loss']:>7.4f} {c['val_loss_model']:>7.4f} {c['val_loss_ema']:>8.4f}")
files = sorted(p for p in out.rglob("*") if p.is_file())
for p in files:
    print(f"{p.stat().st_size / 2**20:8.2f} MiB  {p.relative_to(out)}")
if len(files) > 8 or any(p.stat().st_size >= 16 * 2**20 for p in files):
    sys.exit("more than 8 files, or one of 16 MiB or more: they would not all come back")
PY
