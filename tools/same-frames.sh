#!/usr/bin/env bash
# Renders the same PNG frames with two rtvd binaries on the CPU and compares them byte for byte (cmp): the
# proof that a change meant to keep behaviour keeps every frame.
#   usage: tools/same-frames.sh OLD_RTVD NEW_RTVD [DIR]   (DIR: where the frames go; default a fresh temp folder)
# Cases, 6 frames each: the default model (txt2img at guidance 3, 0.5 and 1, at 4 and 1 steps; img2img at
# strength 0.6, blend 0.5 and 0) and tests/data/tiny_sd (txt2img and img2img, each sampler, guidance 3 and 1).
# The img2img source is a frame OLD_RTVD renders first. One line per case; exit 1 when any frame differs.
set -uo pipefail
if (($# < 2)); then
  sed -n '2,7p' "$0"
  exit 2
fi
# shellcheck disable=SC2034  # old and new are read as ${!which}
old=$1 new=$2 dir=${3:-$(mktemp -d)}
sd=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/data/tiny_sd
mkdir -p "$dir"
"$old" render --device cpu --threads 2 -q -n 1 --seed 11 -o "$dir/source/" || exit 2
image=$dir/source/frame_00000.png
cases=(
  "default-g3|--guidance 3 --steps 4"
  "default-g0.5|--guidance 0.5 --steps 4"
  "default-g1|--guidance 1 --steps 4"
  "default-g3-1step|--guidance 3 --steps 1"
  "default-g0.5-1step|--guidance 0.5 --steps 1"
  "default-img|--source image:$image --strength 0.6 --blend 0.5"
  "default-img-blend0|--source image:$image --strength 0.6 --blend 0"
  "default-img-g1-1step|--source image:$image --strength 0.6 --guidance 1 --steps 1"
)
for sampler in euler lcm ddim; do
  for g in 3 1; do
    cases+=("sd-$sampler-g$g|--model $sd --sampler $sampler --guidance $g --steps 2 --prompt fox")
    cases+=("sd-$sampler-g$g-img|--model $sd --sampler $sampler --guidance $g --steps 4 --prompt fox --source image:$image --strength 0.6")
  done
done
status=0
for c in "${cases[@]}"; do
  name=${c%%|*} flags=${c#*|}
  for which in old new; do
    # shellcheck disable=SC2086  # the flags are words
    if ! "${!which}" render --device cpu --threads 2 -q -n 6 --seed 7 $flags -o "$dir/$name/$which/" \
         >"$dir/$name.$which.log" 2>&1; then
      echo "$name: $which failed: $(tail -1 "$dir/$name.$which.log")"
      status=1
      continue 2
    fi
  done
  same=1
  for f in "$dir/$name/old/"*.png; do cmp "$f" "$dir/$name/new/${f##*/}" || same=0; done
  n=$(find "$dir/$name/new" -name '*.png' | wc -l)
  if ((same)) && [[ $n == 6 ]]; then echo "$name: 6 frames identical"; else echo "$name: DIFFERENT ($n frames)"; status=1; fi
done
exit $status
