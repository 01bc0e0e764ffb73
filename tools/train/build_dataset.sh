#!/usr/bin/env bash
# Builds .device/data/emoji64.npz (+ .json summary), the default model's training set, from pinned
# npm packages: Noto emoji PNGs (Apache-2.0) and Twemoji SVGs (CC-BY 4.0). See assets/README.md.
# Needs npm, rsvg-convert (librsvg2-bin) and a python3 with numpy and Pillow.
set -euo pipefail

NOTO_PACKAGE=emoji-datasource-google@16.0.0
TWEMOJI_PACKAGE=@twemoji/svg@15.0.0
PYTHON=${PYTHON:-/usr/bin/python3}

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo/.device/data/emoji64.npz}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

npm install --prefix "$work" --no-save --no-audit --no-fund --ignore-scripts \
    "$NOTO_PACKAGE" "$TWEMOJI_PACKAGE" >/dev/null

# One rsvg-convert per file, spread over the cores; names stay the SVG's code points.
mkdir "$work/twemoji64"
find "$work/node_modules/@twemoji/svg" -name '*.svg' -print0 |
    xargs -0 -n 64 -P "$(nproc)" sh -c '
        dest=$1; shift
        for svg in "$@"; do
            rsvg-convert -w 64 -h 64 -o "$dest/$(basename "$svg" .svg).png" "$svg"
        done' sh "$work/twemoji64"

"$PYTHON" "$repo/tools/train/pack_dataset.py" \
    --datasource "$work/node_modules/emoji-datasource-google" \
    --twemoji-png "$work/twemoji64" \
    --out "$out"
