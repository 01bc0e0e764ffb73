#!/usr/bin/env bash
# On the GPU machine: programmatic dependent launch off against on, one rtvd binary run as A with RTVD_PDL=0
# and as B with RTVD_PDL=1, through tools/device-compare.sh (bench unet --config sd21 at batch 2 and 1 with
# random weights, bench frames of the default model; alternately, each with its own tuning cache):
#   tools/ab-pdl.sh [RTVD] [rounds]     RTVD: default the rtvd of .device/bundle.tar.xz (tools/device-bundle.sh),
#                                       unpacked here afresh; rounds: 3 by default
# Prints per benchmark the median over rounds of each side's median and B's (PDL on) difference from A (off);
# writes $OUT/compare.json.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
if [[ $# -ge 1 ]]; then
  rtvd=$(realpath "$1")
else
  tar -xJf "$root/.device/bundle.tar.xz" -C "$work"
  rtvd=$work/rtvd
fi
rounds=${2:-3}
bin_dir=$(dirname "$rtvd")
# The bundle's BLAS and ICU libraries, which the GPU machine lacks, lie in lib/ beside its rtvd.
if [[ -d $bin_dir/lib ]]; then export LD_LIBRARY_PATH=$bin_dir/lib:${LD_LIBRARY_PATH:-}; fi
for pdl in 0 1; do
  mkdir -p "$work/pdl$pdl"
  printf '#!/usr/bin/env bash\nRTVD_PDL=%s exec %q "$@"\n' "$pdl" "$rtvd" >"$work/pdl$pdl/rtvd"
  chmod +x "$work/pdl$pdl/rtvd"
  if [[ -f $bin_dir/.commit ]]; then cp "$bin_dir/.commit" "$work/pdl$pdl/"; fi
done
echo "A: RTVD_PDL=0, B: RTVD_PDL=1 ($rtvd, $rounds rounds)"
"$root/tools/device-compare.sh" "$work/pdl0/rtvd" "$work/pdl1/rtvd" "$rounds"
