#!/usr/bin/env bash
# On the GPU machine: the split-K linears (issue 27, latency mode) checked and timed from one bundle:
#   tools/ab-linear-splitk.sh [DIR] [A_RTVD]   DIR: holds rtvd and tests/linear_test (default: the bundle of
#                                              tools/device-bundle.sh, .device/bundle.tar.xz, unpacked afresh);
#                                              A_RTVD: an rtvd without split-K (main), timed alike as the baseline
# 1. linear_test's GPU suite: every candidate linear_algorithms() offers, split-K ones included, against the CPU.
# 2. rtvd bench kernels, its linear rows (split-K candidates show as "cuBLASLt #N split-K P").
# 3. rtvd bench unet --config sd21 --batch 1 --size 64 --profile (512x512): the linear op's row of the profile,
#    and the tuner's pick per linear shape, from its tuning cache (a fresh one per binary).
# Logs and JSON go to $OUT.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-/tmp/rtvd-out}
work=$(mktemp -d)
mkdir -p "$OUT"
if [[ $# -ge 1 ]]; then
  dir=$(realpath "$1")
else
  tar -xJf "$root/.device/bundle.tar.xz" -C "$work" && dir=$work
fi
base=${2:+$(realpath "$2")}
if [[ -d $dir/lib ]]; then export LD_LIBRARY_PATH=$dir/lib:${LD_LIBRARY_PATH:-}; fi
[[ -f $dir/.commit ]] && echo "B: $(cat "$dir/.commit")"

echo "== linear_test, GPU suite"
"$dir/tests/linear_test" --gtest_filter='*LinearCuda*' >"$OUT/linear_test.log" 2>&1
rc=$?
echo "rc $rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) *\]' "$OUT/linear_test.log" | head -3 | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|Failure|split-K offered' "$OUT/linear_test.log" | head -20

echo "== bench kernels, linear"
"$dir/rtvd" bench kernels --json "$OUT/kernels.json" >"$OUT/kernels.log" 2>&1 || tail -3 "$OUT/kernels.log"
python3 - "$OUT/kernels.json" <<'EOF'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["results"] if r["op"] == "linear" and "ms" in r]
for case in dict.fromkeys(r["case"] for r in rows):
    mine = [r for r in rows if r["case"] == case]
    default, best = mine[0], min(mine[1:] or mine, key=lambda r: r["ms"])
    split = min((r for r in mine if "split-K" in r["impl"]), key=lambda r: r["ms"], default=None)
    print(f"{case:28} {default['impl'][:30]:30} {default['ms']*1e3:8.1f} us  best {best['impl'][:30]:30} "
          f"{best['ms']*1e3:8.1f} us" + (f"  best split-K {split['ms']*1e3:8.1f} us" if split else ""))
EOF

unet() {  # name rtvd
  mkdir -p "$work/cache_$1"
  RTVD_CACHE_DIR=$work/cache_$1 "$2" bench unet --config sd21 --batch 1 --size 64 --device cuda --profile \
    --json "$OUT/unet_b1_$1.json" >"$OUT/unet_b1_$1.log" 2>&1 || { tail -3 "$OUT/unet_b1_$1.log"; return; }
  python3 - "$OUT/unet_b1_$1.json" "$work/cache_$1/autotune.json" "$1" <<'EOF'
import json, sys
d, cache, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
linear = next((o for o in d.get("ops_per_forward", []) if o["op"] == "linear"), {})
print(f"{name}: U-Net {d['ms_median']:.3f} ms; linear {linear.get('calls')} calls {linear.get('ms', 0):.3f} ms")
for key, v in sorted(cache["layers"].items()):
    if "|linear " in key:  # a cuBLASLt name's 128 hex digits shortened to their first 8
        impl = v["impl"] if len(v["impl"]) < 40 else v["impl"][:17] + "..." + v["impl"][137:]
        print(f"  {key.split('|', 1)[1]:42} {impl:40} {v['ms'] * 1e3:7.1f} us")
EOF
}
echo "== bench unet sd21, batch 1, 512x512"
unet b "$dir/rtvd"
if [[ -n $base ]]; then unet a "$base"; fi
rm -rf "$work"
