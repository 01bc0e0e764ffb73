#!/usr/bin/env bash
# On the GPU machine: the same end-to-end benchmarks with two rtvd binaries in one run, alternating
# (A, B, A, B, ...) so that clocks and neighbours weigh on both alike; for before/after comparisons of a
# change that must not move performance:
#   tools/device-compare.sh A_RTVD B_RTVD [rounds]      (3 rounds by default)
#   BENCHES=$'name:args\nname:args' tools/device-compare.sh ...   (other benchmarks, one "name:rtvd args" a line)
# Each binary keeps its own tuning cache, warmed by one untimed run first. Benchmarks: rtvd bench unet
# --config sd21 at batch 2 and 1, rtvd bench frames. Prints per benchmark the median over rounds of each
# binary's median and B's difference from A; writes $OUT/compare.json.
set -uo pipefail
a=$(realpath "$1") b=$(realpath "$2") rounds=${3:-3}
OUT=${OUT:-/tmp/rtvd-out}
work=$(mktemp -d)
mkdir -p "$OUT" "$work/cache_a" "$work/cache_b"
benches=("unet_b2:bench unet --config sd21 --batch 2 --device cuda"
         "unet_b1:bench unet --config sd21 --batch 1 --device cuda"
         "frames:bench frames --device cuda --frames 2000")
if [[ -n ${BENCHES:-} ]]; then mapfile -t benches <<<"$BENCHES"; fi
run() {  # binary cache name args... -> the JSON's median ms on stdout
  local bin=$1 cache=$2 name=$3
  shift 3
  RTVD_CACHE_DIR=$cache "$bin" "$@" --json "$work/$name.json" >"$work/$name.log" 2>&1 || { tail -3 "$work/$name.log" >&2; echo nan; return; }
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("ms_median", d.get("frame_ms_median")))' "$work/$name.json"
}
for entry in "${benches[@]}"; do
  name=${entry%%:*} args=${entry#*:}
  run "$a" "$work/cache_a" warm $args >/dev/null
  run "$b" "$work/cache_b" warm $args >/dev/null
  for ((r = 0; r < rounds; ++r)); do
    echo "$name a $(run "$a" "$work/cache_a" "${name}_a$r" $args)" >>"$work/results"
    echo "$name b $(run "$b" "$work/cache_b" "${name}_b$r" $args)" >>"$work/results"
  done
done
python3 - "$work/results" "$OUT/compare.json" "$a" "$b" <<'PY'
import datetime, json, os, statistics, subprocess, sys
rows = [l.split() for l in open(sys.argv[1])]
def commit(binary):  # tools/device-bundle.sh writes .commit beside the binary
    path = os.path.join(os.path.dirname(binary), ".commit")
    return open(path).read().strip() if os.path.exists(path) else "unknown"
gpu, driver = subprocess.check_output(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], text=True).strip().split(", ")
out = {"bench": "compare", "gpu": gpu, "driver": driver, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "a": {"binary": sys.argv[3], "commit": commit(sys.argv[3])}, "b": {"binary": sys.argv[4], "commit": commit(sys.argv[4])},
       "benchmarks": {}}
print(f"{'benchmark':10} {'A ms':>9} {'B ms':>9} {'B vs A':>8}   (median of rounds; each a median of its runs)")
for name in dict.fromkeys(r[0] for r in rows):
    ms = {w: [float(r[2]) for r in rows if r[0] == name and r[1] == w] for w in "ab"}
    med = {w: statistics.median(v) for w, v in ms.items()}
    diff = 100 * (med["b"] / med["a"] - 1)
    out["benchmarks"][name] = {"a_ms": ms["a"], "b_ms": ms["b"], "a_median": med["a"], "b_median": med["b"], "b_vs_a_percent": diff}
    print(f"{name:10} {med['a']:9.4f} {med['b']:9.4f} {diff:+7.2f}%")
json.dump(out, open(sys.argv[2], "w"), indent=2)
PY
