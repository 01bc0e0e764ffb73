#!/usr/bin/env bash
# Flicker of rtvd's video for a static input: the mean absolute difference between consecutive frames
# (0-255 scale, RGB) when every frame starts from the same image (img2img at a strength), with and
# without the temporal blend. The input is a frame rtvd renders first. Needs ffmpeg (tools/quickstart.sh
# installs it), which decodes the frames to raw RGB for awk to compare.
#   tools/flicker.sh BUILD_DIR [FRAMES] [STRENGTH]
set -euo pipefail
usage="usage: tools/flicker.sh BUILD_DIR [FRAMES] [STRENGTH]"
build=${1:?$usage}
frames=${2:-24}
strength=${3:-0.6}
die() { echo "flicker: $*" >&2; exit 2; }
[[ -x "$build/rtvd" ]] || die "no rtvd in '$build' ($usage)"
command -v ffmpeg >/dev/null || die "needs ffmpeg (apt-get install ffmpeg)"
if [[ ! $frames =~ ^[0-9]+$ ]] || ((frames < 2)); then die "FRAMES must be an integer >= 2, got '$frames'"; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/rtvd" render --device cpu --quiet --frames 1 --class animals -o "$tmp/input/" >/dev/null
input=$(ls "$tmp"/input/*.png)
for blend in 0 0.5 0.8; do
  "$build/rtvd" render --device cpu --quiet --frames "$frames" --source "image:$input" \
    --strength "$strength" --blend "$blend" -o "$tmp/blend-$blend/" >/dev/null
done
size=$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0:s=x "$input")
frame_bytes=$((${size%x*} * ${size#*x} * 3))
for blend in 0 0.5 0.8; do
  # One line of decimal bytes per frame, in name order (rtvd's numbering); the mean over consecutive pairs of
  # each pair's mean |difference|.
  ffmpeg -v error -pattern_type glob -i "$tmp/blend-$blend/*.png" -f rawvideo -pix_fmt rgb24 - |
    od -An -v -tu1 -w"$frame_bytes" |
    awk -v strength="$strength" -v blend="$blend" '
      { for (i = 1; i <= NF; ++i) cur[i] = $i }
      NR > 1 {
        d = 0
        for (i = 1; i <= NF; ++i) d += cur[i] > prev[i] ? cur[i] - prev[i] : prev[i] - cur[i]
        sum += d / NF
      }
      { for (i = 1; i <= NF; ++i) prev[i] = cur[i] }
      END {
        printf "strength %s, blend %4s: mean |frame[i+1] - frame[i]| = %.2f / 255 over %d frames\n", strength, blend,
               sum / (NR - 1), NR
      }'
done
