#!/usr/bin/env bash
# Flicker of rtvd's video for a static input: the mean absolute difference between consecutive frames
# (0-255 scale, RGB) when every frame starts from the same image (img2img at a strength), with and
# without the temporal blend. The input is a frame rtvd renders first.
#   tools/flicker.sh BUILD_DIR [FRAMES] [STRENGTH]
set -euo pipefail
build=${1:?usage: tools/flicker.sh BUILD_DIR [FRAMES] [STRENGTH]}
frames=${2:-24}
strength=${3:-0.6}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/rtvd" render --device cpu --quiet --frames 1 --class animals -o "$tmp/input/" >/dev/null
for blend in 0 0.5 0.8; do
  "$build/rtvd" render --device cpu --quiet --frames "$frames" --source "image:$(ls "$tmp"/input/*.png)" \
    --strength "$strength" --blend "$blend" -o "$tmp/blend-$blend/" >/dev/null
done
${PYTHON:-python3} - "$tmp" "$strength" <<'PY'
import pathlib, sys
import numpy as np
from PIL import Image
tmp, strength = pathlib.Path(sys.argv[1]), sys.argv[2]
for d in sorted(tmp.glob("blend-*")):
    f = [np.asarray(Image.open(p).convert("RGB"), dtype=np.float64) for p in sorted(d.glob("*.png"))]
    mad = np.mean([np.abs(a - b).mean() for a, b in zip(f, f[1:])])
    print(f"strength {strength}, blend {d.name[6:]:>4}: mean |frame[i+1] - frame[i]| = {mad:.2f} / 255 over {len(f)} frames")
PY
