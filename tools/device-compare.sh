#!/usr/bin/env bash
# On the GPU machine: the same end-to-end benchmarks with two or more rtvd binaries in one run, alternating
# (A, B, C, A, B, C, ...) so that clocks and neighbours weigh on all alike; for before/after comparisons of a
# change, or of several variants of one:
#   tools/device-compare.sh A_RTVD B_RTVD [C_RTVD ...] [rounds]      (3 rounds by default)
#   BENCHES=$'name:args\nname:args' tools/device-compare.sh ...   (other benchmarks, one "name:rtvd args" a line)
# Each binary keeps its own tuning cache, warmed by one untimed run first; with SHARE_CACHE=1 all use A's, so
# that where their kernels' names are the same every binary runs A's choices, and only what the change does
# differs (the tuner's choices alone move the default model's frame by ~1% between binaries); a binary still
# tunes the layers whose cached choice it lacks. SHARE_CACHE=1 with RETUNE=REGEX (as '^attention'): each other
# binary starts from a copy of A's choices, once A has tuned each benchmark, without the layers whose key (the op's
# shape key, as "attention 1x5x64 q4096 ...") matches REGEX, and tunes those itself: for a change that adds or
# alters candidates of one op, measured with every other layer on A's choices (with A's cache alone a binary
# would never time the new candidates). With TIMING_ONLY=1 a run whose output was not finite still
# counts (rtvd bench unet writes its JSON, then exits 1): for variants that skip work on purpose. Benchmarks:
# rtvd bench unet --config sd21 at batch 2 and 1, rtvd bench frames. Prints per benchmark the median over rounds
# of each binary's median and each one's difference from A; writes $OUT/compare.json.
set -uo pipefail
rounds=3
if [[ $# -ge 3 && ${!#} =~ ^[0-9]+$ ]]; then rounds=${!#}; set -- "${@:1:$#-1}"; fi
if [[ $# -lt 2 ]]; then echo "usage: tools/device-compare.sh A_RTVD B_RTVD [C_RTVD ...] [rounds]" >&2; exit 2; fi
bins=()
for bin in "$@"; do bins+=("$(realpath "$bin")"); done
labels=(a b c d e f g h i j k l m n o p q r s t u v w x y z)
(( ${#bins[@]} <= ${#labels[@]} )) || { echo "device-compare: at most ${#labels[@]} binaries" >&2; exit 2; }
OUT=${OUT:-/tmp/rtvd-out}
work=$(mktemp -d)
mkdir -p "$OUT"
retune=${RETUNE:-}
[[ ${SHARE_CACHE:-0} == 1 ]] || retune=""
cache() {  # label -> tuning cache
  [[ ${SHARE_CACHE:-0} == 1 && ( -z $retune || $1 == a ) ]] && echo "$work/cache_a" || echo "$work/cache_$1"
}
seed() {  # label: A's choices into its cache, but for the layers whose key matches $retune and those it has
  python3 - "$(cache a)/autotune.json" "$(cache "$1")/autotune.json" "$retune" <<'PY'
import json, os, re, sys
src, dst, retune = sys.argv[1:4]
if not os.path.exists(src):
    sys.exit(0)
a = json.load(open(src))
b = json.load(open(dst)) if os.path.exists(dst) else {"version": a.get("version"), "layers": {}}
for key, choice in a.get("layers", {}).items():  # keys: "<device>|<layer>"
    if not re.search(retune, key.split("|", 1)[-1]):
        b["layers"].setdefault(key, choice)
json.dump(b, open(dst, "w"), indent=1)
PY
}
for ((i = 0; i < ${#bins[@]}; ++i)); do mkdir -p "$(cache "${labels[i]}")"; done
benches=("unet_b2:bench unet --config sd21 --batch 2 --device cuda"
         "unet_b1:bench unet --config sd21 --batch 1 --device cuda"
         "frames:bench frames --device cuda --frames 2000")
if [[ -n ${BENCHES:-} ]]; then mapfile -t benches <<<"$BENCHES"; fi
run() {  # binary cache name args... -> the JSON's median ms on stdout
  local bin=$1 cache=$2 name=$3 rc=0
  shift 3
  rm -f "$work/$name.json"
  RTVD_CACHE_DIR=$cache "$bin" "$@" --json "$work/$name.json" >"$work/$name.log" 2>&1 || rc=$?
  # A failed run counts only with TIMING_ONLY=1, and only as rtvd bench unet fails after writing its JSON: its
  # output not finite (a variant built to be timed, not used: ops left out, a transform skipped).
  python3 -c 'import json,os,sys
rc, path, timing_only = int(sys.argv[1]), sys.argv[2], os.environ.get("TIMING_ONLY") == "1"
d = json.load(open(path)) if os.path.exists(path) else {}
ok = rc == 0 or (timing_only and d.get("output_finite") is False)
print(d.get("ms_median", d.get("frame_ms_median")) if ok and d else "nan")' "$rc" "$work/$name.json" ||
    echo nan
  [[ $rc == 0 ]] || tail -3 "$work/$name.log" >&2
}
for entry in "${benches[@]}"; do
  name=${entry%%:*} args=${entry#*:}
  for ((i = 0; i < ${#bins[@]}; ++i)); do
    if [[ -n $retune && $i -gt 0 ]]; then seed "${labels[i]}"; fi
    run "${bins[i]}" "$(cache "${labels[i]}")" warm $args >/dev/null
  done
  for ((r = 0; r < rounds; ++r)); do
    for ((i = 0; i < ${#bins[@]}; ++i)); do
      w=${labels[i]}
      echo "$name $w $(run "${bins[i]}" "$(cache "$w")" "${name}_$w$r" $args)" >>"$work/results"
    done
  done
done
python3 - "$work/results" "$OUT/compare.json" "${bins[@]}" <<'PY'
import datetime, json, os, statistics, string, subprocess, sys
rows = [l.split() for l in open(sys.argv[1])]
binaries = dict(zip(string.ascii_lowercase, sys.argv[3:]))
def commit(binary):  # tools/device-bundle.sh writes .commit beside the binary
    path = os.path.join(os.path.dirname(binary), ".commit")
    return open(path).read().strip() if os.path.exists(path) else "unknown"
gpu, driver = subprocess.check_output(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], text=True).strip().split(", ")
out = {"bench": "compare", "gpu": gpu, "driver": driver, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
if os.environ.get("SHARE_CACHE") == "1" and os.environ.get("RETUNE"):
    out["tuning_cache"] = ("A's choices copied to every binary, but for the layers whose key matches RETUNE, "
                           "which each binary tuned itself")
    out["retune"] = os.environ["RETUNE"]
elif os.environ.get("SHARE_CACHE") == "1":
    out["tuning_cache"] = "shared: every binary ran A's choices where it has them"
if os.environ.get("TIMING_ONLY") == "1":
    out["timing_only"] = "runs whose output was not finite were counted (variants built to be timed, not used)"
out.update({w: {"binary": b, "commit": commit(b)} for w, b in binaries.items()})
out["benchmarks"] = {}
others = [w for w in binaries if w != "a"]
print(f"{'benchmark':10} " + " ".join(f"{w.upper() + ' ms':>9}" for w in binaries) + " " +
      " ".join(f"{w.upper() + ' vs A':>8}" for w in others) + "   (median of rounds; each a median of its runs)")
for name in dict.fromkeys(r[0] for r in rows):
    ms = {w: [float(r[2]) for r in rows if r[0] == name and r[1] == w] for w in binaries}
    med = {w: statistics.median(v) for w, v in ms.items()}
    diff = {w: 100 * (med[w] / med["a"] - 1) for w in others}
    out["benchmarks"][name] = {**{f"{w}_ms": v for w, v in ms.items()}, **{f"{w}_median": v for w, v in med.items()},
                               **{f"{w}_vs_a_percent": v for w, v in diff.items()}}
    print(f"{name:10} " + " ".join(f"{med[w]:9.4f}" for w in binaries) + " " + " ".join(f"{diff[w]:+7.2f}%" for w in others))
json.dump(out, open(sys.argv[2], "w"), indent=2)
PY
