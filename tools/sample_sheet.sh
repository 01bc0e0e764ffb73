#!/usr/bin/env bash
# The default model's sample sheet, rendered by rtvd itself: one row per class, columns for 4 and 8 steps
# at guidance 1, 3 and 5, the same seed everywhere. Composed into one PNG with Pillow.
#   tools/sample_sheet.sh BUILD_DIR OUT.png [SEED]
set -euo pipefail
build=${1:?usage: tools/sample_sheet.sh BUILD_DIR OUT.png [SEED]}
out=${2:?usage: tools/sample_sheet.sh BUILD_DIR OUT.png [SEED]}
seed=${3:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
classes=$("$build/rtvd" info --device cpu | sed -n 's/^  classes *[0-9]* + null: //p' | tr -d ',')
for c in $classes; do
  for steps in 4 8; do
    for g in 1 3 5; do
      "$build/rtvd" render --device cpu --quiet --frames 1 --seed "$seed" --class "$c" --steps "$steps" \
        --guidance "$g" -o "$tmp/$c-$steps-$g/" >/dev/null
    done
  done
done
${PYTHON:-python3} - "$tmp" "$out" $classes <<'PY'
import pathlib, sys
from PIL import Image, ImageDraw
tmp, out, classes = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
cols = [(s, g) for s in (4, 8) for g in (1, 3, 5)]
cell, label_w, head = 64, 90, 16
sheet = Image.new("RGB", (label_w + cell * len(cols), head + cell * len(classes)), "white")
draw = ImageDraw.Draw(sheet)
for j, (s, g) in enumerate(cols):
    draw.text((label_w + j * cell + 4, 2), f"{s}st g{g}", fill="black")
for i, c in enumerate(classes):
    draw.text((4, head + i * cell + 26), c, fill="black")
    for j, (s, g) in enumerate(cols):
        frame = next((tmp / f"{c}-{s}-{g}").glob("*.png"))
        sheet.paste(Image.open(frame).convert("RGB"), (label_w + j * cell, head + i * cell))
sheet.save(out)
print(f"wrote {out}: {len(classes)} classes x {len(cols)} settings")
PY
