#!/usr/bin/env bash
# tools/device-compare.sh with stand-ins for rtvd and nvidia-smi: which runs count (a binary that wrote no JSON
# never; one whose output was not finite only with TIMING_ONLY=1), the medians and the JSON's keys, which tuning
# choices each binary runs (its own; A's with SHARE_CACHE=1; A's but for the RETUNE layers), the usage.
# Skips (77) without python3, which the script needs for its medians.
set -uo pipefail
root=$1
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/bin"
printf '#!/bin/sh\necho "Stand-in GPU, 1.0"\n' >"$t/bin/nvidia-smi"
# a: fine, 1.5 ms; b: writes its JSON with a non-finite output, then fails (as rtvd bench unet does); c: fails
# before any JSON.
for v in a b c; do
  cat >"$t/rtvd_$v" <<STUB
#!/usr/bin/env bash
while [[ \$# -gt 0 ]]; do [[ \$1 == --json ]] && json=\$2; shift; done
case $v in
  a) echo '{"ms_median": 1.5, "output_finite": true}' >"\$json";;
  b) echo '{"ms_median": 1.2, "output_finite": false}' >"\$json"; echo "rtvd: error: not finite" >&2; exit 1;;
  c) echo "rtvd: error: no device" >&2; exit 1;;
esac
STUB
done
chmod +x "$t"/bin/nvidia-smi "$t"/rtvd_*
fail=0
check() {  # what expected actual
  if [[ $2 != "$3" ]]; then echo "FAIL: $1: expected $2, got $3"; fail=1; else echo "ok: $1"; fi
}
compare() {  # out-dir env... -> runs the tool on the three stand-ins, two rounds, one benchmark
  local out=$1
  shift
  env PATH="$t/bin:$PATH" OUT="$out" BENCHES='unet_b1:bench unet' "$@" bash "$root/tools/device-compare.sh" \
    "$t/rtvd_a" "$t/rtvd_b" "$t/rtvd_c" 2 >"$out.log" 2>&1
}
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$@"; }

compare "$t/plain"
check "exit code" 0 $?
check "A's median" 1.5 "$(field "$t/plain/compare.json" 'd["benchmarks"]["unet_b1"]["a_median"]')"
check "B not counted without TIMING_ONLY" "[nan, nan]" "$(field "$t/plain/compare.json" 'd["benchmarks"]["unet_b1"]["b_ms"]')"
check "no timing_only key" False "$(field "$t/plain/compare.json" '"timing_only" in d')"

compare "$t/timing" TIMING_ONLY=1
check "exit code (TIMING_ONLY)" 0 $?
check "B counted with TIMING_ONLY" "[1.2, 1.2]" "$(field "$t/timing/compare.json" 'd["benchmarks"]["unet_b1"]["b_ms"]')"
check "B against A" -20.0 "$(field "$t/timing/compare.json" 'round(d["benchmarks"]["unet_b1"]["b_vs_a_percent"], 2)')"
check "C never counted" "[nan, nan]" "$(field "$t/timing/compare.json" 'd["benchmarks"]["unet_b1"]["c_ms"]')"
check "timing_only key" True "$(field "$t/timing/compare.json" '"timing_only" in d')"
check "GPU from nvidia-smi" "Stand-in GPU" "$(field "$t/timing/compare.json" 'd["gpu"]')"

# The tuning caches: stand-ins d and e tune (write their own name as the choice of) every layer their cache
# lacks, an attention layer and a conv, and log which choices they then ran with.
for v in d e; do
  cat >"$t/rtvd_$v" <<STUB
#!/usr/bin/env bash
while [[ \$# -gt 0 ]]; do [[ \$1 == --json ]] && json=\$2; shift; done
python3 - "\$RTVD_CACHE_DIR/autotune.json" >>"$t/choices_\$LOG" <<'PY'
import json, os, sys
path = sys.argv[1]
d = json.load(open(path)) if os.path.exists(path) else {"version": 7, "layers": {}}
for layer in ("attention 1x5x64 q4096", "conv2d 1x64x64x320"):
    d["layers"].setdefault("GPU sm_90|" + layer, {"impl": "$v", "ms": 1.0})
json.dump(d, open(path, "w"))
print("$v", " ".join(d["layers"]["GPU sm_90|" + l]["impl"] for l in ("attention 1x5x64 q4096", "conv2d 1x64x64x320")))
PY
echo '{"ms_median": 1.0, "output_finite": true}' >"\$json"
STUB
done
chmod +x "$t"/rtvd_d "$t"/rtvd_e
tuned() {  # log env... -> the choices e ran with last: "<attention's> <conv's>"
  local log=$1
  shift
  env PATH="$t/bin:$PATH" OUT="$t/$log" LOG=$log BENCHES='unet_b1:bench unet' "$@" bash "$root/tools/device-compare.sh" \
    "$t/rtvd_d" "$t/rtvd_e" 1 >"$t/$log.log" 2>&1
  grep '^e ' "$t/choices_$log" | tail -1 | cut -d' ' -f2-
}
check "own caches: e runs its own choices" "e e" "$(tuned own)"
check "SHARE_CACHE: e runs d's choices" "d d" "$(tuned shared SHARE_CACHE=1)"
check "SHARE_CACHE with RETUNE: e tunes attention, runs d's conv" "e d" "$(tuned retune SHARE_CACHE=1 RETUNE='^attention')"
check "RETUNE in the JSON" "^attention" "$(field "$t/retune/compare.json" 'd.get("retune")')"
check "RETUNE alone is ignored: own caches" "e e" "$(tuned retune_alone RETUNE='^attention')"

env PATH="$t/bin:$PATH" OUT="$t/one" bash "$root/tools/device-compare.sh" "$t/rtvd_a" >"$t/one.log" 2>&1
check "one binary: usage, exit 2" 2 $?
check "usage line" 1 "$(grep -c '^usage: tools/device-compare.sh' "$t/one.log")"
exit $fail
