#!/usr/bin/env bash
# The default model's sample sheet, rendered by rtvd itself: one row per class, columns for 4 and 8 steps
# at guidance 1, 3 and 5, the same seed everywhere. Composed into one PNG by ffmpeg (tile, pad and
# drawtext filters; tools/quickstart.sh installs it). About two minutes on 2 idle CPU cores.
#   tools/sample_sheet.sh BUILD_DIR OUT.png [SEED]
set -euo pipefail
usage="usage: tools/sample_sheet.sh BUILD_DIR OUT.png [SEED]"
build=${1:?$usage}
out=${2:?$usage}
seed=${3:-7}
die() { echo "sample_sheet: $*" >&2; exit 2; }
# Everything is checked before the renders, which take minutes.
[[ -x "$build/rtvd" ]] || die "no rtvd in '$build' ($usage)"
[[ $out == *.png ]] || die "OUT must end in .png, got '$out'"
[[ $seed =~ ^[0-9]+$ ]] || die "SEED must be a non-negative integer, got '$seed'"
command -v ffmpeg >/dev/null || die "needs ffmpeg (apt-get install ffmpeg)"
[[ $(ffmpeg -hide_banner -filters 2>/dev/null) == *" drawtext "* ]] ||
  die "this ffmpeg has no drawtext filter (built without libfreetype)"
mkdir -p "$(dirname "$out")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
read -r -a classes < <("$build/rtvd" info --device cpu | sed -n 's/^  classes *[0-9]* + null: //p' | tr -d ',')
((${#classes[@]})) || die "rtvd info lists no classes"
cols=("4 1" "4 3" "4 5" "8 1" "8 3" "8 5")  # steps, guidance
cell=64 label_w=90 head=16
n=0
for c in "${classes[@]}"; do
  for col in "${cols[@]}"; do
    read -r steps g <<<"$col"
    "$build/rtvd" render --device cpu --quiet --frames 1 --size "$cell" --seed "$seed" --class "$c" \
      --steps "$steps" --guidance "$g" -o "$tmp/cell/" >/dev/null
    mv "$tmp"/cell/*.png "$(printf '%s/%03d.png' "$tmp" "$n")"
    n=$((n + 1))
  done
done

# The cells row by row into one grid, a white margin for the labels at the left and top, then the labels.
text="fontsize=11:fontcolor=black"
filter="tile=${#cols[@]}x${#classes[@]},pad=w=iw+$label_w:h=ih+$head:x=$label_w:y=$head:color=white"
for j in "${!cols[@]}"; do
  read -r steps g <<<"${cols[j]}"
  filter+=",drawtext=$text:x=$((label_w + j * cell + 4)):y=2:text=${steps}st g$g"
done
for i in "${!classes[@]}"; do
  filter+=",drawtext=$text:x=4:y=$((head + i * cell + 26)):text=${classes[i]}"
done
ffmpeg -v error -y -i "$tmp/%03d.png" -vf "$filter" -frames:v 1 -update 1 "$out"
echo "wrote $out: ${#classes[@]} classes x ${#cols[@]} settings"
