#!/usr/bin/env bash
# On the GPU machine: unpack the bundle built here (tools/device-bundle.sh), then run what is asked:
#   tools/device-check.sh [tests|sanitize|render|bench|kernels|text|sd|sd15|gui|fuzz|all]...
# Few files come back from the device, so $OUT gets: summary.txt, logs.tar.gz (every log), the
# benchmark JSON and the Perfetto trace of a profiled render. The summary is printed last.
set -uo pipefail
OUT=${OUT:-/tmp/rtvd-out}
LOGS=/tmp/rtvd-logs
mkdir -p "$OUT" "$LOGS"
dir=/tmp/rtvd
root=$PWD
# Unpacked afresh: a machine kept warm between calls still has the previous call's bundle.
# Only the GUI run goes without it (it has its own, .device/gui.tar.xz).
# The tests' data and models are the tree's (the bundle leaves them out: what a call carries is limited).
if [[ -f .device/bundle.tar.xz ]]; then
  rm -rf $dir && mkdir -p $dir && tar -xJf .device/bundle.tar.xz -C $dir
  ln -s "$root/tests/data" $dir/tests/data && ln -s "$root/assets" $dir/tests/assets
elif [[ "$*" != gui && "$*" != fuzz ]]; then
  echo "no .device/bundle.tar.xz: run tools/device-bundle.sh first"; exit 1
fi
export LD_LIBRARY_PATH=$dir/lib:${LD_LIBRARY_PATH:-}
cd $dir
summary=()
note() { summary+=("$1"); echo "== $1"; }

# The test binaries of tests/ops (each op's case table, the CPU reference and every GPU implementation; one
# per op folder, and conv2d's requirements), the other GPU suites, and the engine and golden tests.
op_tests=(conv2d_test conv2d_requirements_test attention_test linear_test group_norm_test layer_norm_test
          elementwise_test embedding_test cast_test denoise_test similarity_test canny_test)

# Each test binary runs from a scratch directory of its own, with nothing pointing elsewhere: it must find
# tests/data, tests/assets (the tree's, linked) and rtvd beside itself (tests/support/test_util.h).
run_test() {
  local cwd
  cwd=$(mktemp -d)
  (cd "$cwd" && env -u RTVD_TEST_DATA -u RTVD_ASSETS -u RTVD_BINARY "$@")
}

run_tests() {
  for t in $dir/tests/*_cuda_test "${op_tests[@]/#/$dir/tests/}" $dir/tests/engine_test $dir/tests/unet_golden_test \
           $dir/tests/similarity_filter_test $dir/tests/feature_cache_test $dir/tests/canny_graph_test; do
    name=$(basename "$t")
    [[ -x $t ]] || { note "$(printf '%-26s not in the bundle (tools/device-bundle.sh tests TEST...)' "$name")"; continue; }
    run_test timeout 300 "$t" --gtest_brief=1 >"$LOGS/$name.log" 2>&1
    rc=$?
    note "$(printf '%-26s rc=%-3s %s' "$name" "$rc" "$(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/$name.log" | tr '\n' ' ')")"
    grep -E '^\[  FAILED  \]|Failure|error' "$LOGS/$name.log" | head -20
  done
}

# The four tools run side by side (one process each on the one GPU); each binary's smaller cases, since
# sanitizers run kernels 10-100x slower: the op tests' GPU suites (*Cuda*), without the slow simple kernels
# (direct conv, FMA linear) at production shapes. conv2d_test: the entry point on the edge cases, every wgmma
# tile on every case it takes, every implementation in place; conv2d_requirements_test: the GPU requirements
# but the cuDNN plan's; attention_test: every implementation on a few cases. synccheck skips NVIDIA's library kernels: it overflows its
# barrier tracking in cuDNN's generated SDPA kernels and kills them. racecheck checks every kernel (with
# library kernels excluded it fails with an internal error when they run) and its summary line says how
# many hazards lie in NVIDIA's kernels: cuBLASLt's nvjet GEMMs (tools/repro/cublaslt_racecheck.cu shows
# them with nothing of rtvd in the process) and cuDNN's generated SDPA kernels. racecheck_own is racecheck
# again without the tests that reach those kernels (every cuBLASLt algorithm and linear()'s default, cuDNN's
# SDPA and convolution): rtvd's kernels alone, which must report no hazard.
# SANITIZE_TESTS (test binary names), SANITIZE_TOOLS and SANITIZE_FILTER (one gtest filter for every binary,
# in place of each one's own) narrow a run that would not fit one device call.
run_sanitizers() {
  local tests=(${SANITIZE_TESTS:-"${op_tests[@]}" unet_cuda_test engine_test})
  local tools=(${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck racecheck_own})
  for tool in "${tools[@]}"; do
    (
      local skip=()
      [[ $tool == synccheck ]] &&
        skip=(--kernel-name-exclude kns=nvjet --kernel-name-exclude kns=cudnn_generated)
      local run_tool=${tool%_own}
      for t in "${tests[@]}"; do
        local filter='*Cuda*' without='' limit=90
        case $t in
          unet_cuda_test) filter='*Tiny*' limit=240 ;;
          engine_test) filter='*/1' limit=240 ;;  # the CUDA case: copy stream, pinned staging, readback
          stream_batch_cuda_test) filter='*default_txt2img*:*sd_lcm*' limit=240 ;;  # slot moves, LCM noise, groups
          similarity_filter_test | feature_cache_test) filter='*/1' limit=240 ;;  # the CUDA cases
          launch_cuda_test) filter='*' ;;
          attention_test)
            filter='*Cuda*/default_16x16:*Cuda*/q67_d64_pad:*Cuda*/cross_kv1:*Cuda*/fallback_d4:*Cuda*/fallback_cross_d12:*Cuda*/peaked_d40' ;;
          conv2d_test)
            filter='Edge/Conv2dCuda.Default/*:*Conv2dCuda.Wgmma/*:*Conv2dCuda.*/in_place*'
            without='*.Cudnn/*' limit=300 ;;
          conv2d_requirements_test) filter='Conv2dCudaRequirements.*' without='*CudnnPlan*' limit=300 ;;
          linear_test) without='Production/LinearCuda.Fallback/*' limit=240 ;;
        esac
        [[ -n ${SANITIZE_FILTER:-} ]] && filter=$SANITIZE_FILTER without='' limit=300
        [[ $tool == racecheck_own ]] && without+="${without:+:}*LinearCuda.Cublaslt/*:*LinearCuda.Default/*:*Cudnn*"
        run_test timeout $limit compute-sanitizer --tool $run_tool "${skip[@]}" --error-exitcode 3 "$dir/tests/$t" \
          --gtest_brief=1 --gtest_filter="$filter${without:+-$without}" >"$LOGS/san_${tool}_$t.log" 2>&1
        echo $? >"$LOGS/san_${tool}_$t.rc"
      done
    ) &
  done
  wait
  for tool in "${tools[@]}"; do
    for t in "${tests[@]}"; do
      local where=""
      if [[ $tool == racecheck* ]]; then  # hazards whose two accesses are both in NVIDIA's library kernels
        local all lib
        all=$(grep -c 'Race reported between' "$LOGS/san_${tool}_$t.log")
        lib=$(awk '/Race reported between/ { first = ($0 ~ /access at (nvjet|cudnn_generated)/); getline;
                   if (first && $0 ~ /access at (nvjet|cudnn_generated)/) n++ } END { print n + 0 }' "$LOGS/san_${tool}_$t.log")
        where=" ($((all - lib)) in rtvd's kernels, $lib in NVIDIA's library kernels)"
      fi
      note "$(printf 'sanitizer %-13s %-20s rc=%s  %s%s' $tool $t "$(cat "$LOGS/san_${tool}_$t.rc")" \
        "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/san_${tool}_$t.log" | tail -1)" "$where")"
    done
  done
}

run_render() {
  ./rtvd info >"$LOGS/info.txt" 2>&1
  ./rtvd render --device cuda --frames 240 -o /tmp/frames/ --quiet --profile "$OUT/profile_trace.json" >"$LOGS/render_profile.txt" 2>&1
  note "render+profile rc=$? $(grep -E '^wrote' "$LOGS/render_profile.txt")"
  cat "$LOGS/render_profile.txt"
}

# GPU, driver and commit added to a benchmark's JSON for docs/bench/.
stamp() {
  python3 - "$1" "$2" <<'PY'
import json, os, subprocess, sys
doc = json.load(open(sys.argv[1]))
gpu, driver = subprocess.check_output(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], text=True).strip().split(", ")
doc.update(gpu=gpu, driver=driver, commit=open(".commit").read().strip() if os.path.exists(".commit") else "unknown")
json.dump(doc, open(sys.argv[2], "w"), indent=2)
PY
}

# End-to-end frame rate of the default model.
run_bench() {
  ./rtvd bench frames --device cuda --frames 2000 --json "$LOGS/bench.json" >"$LOGS/bench.txt" 2>&1
  note "bench frames rc=$? $(grep -E '^frame:' "$LOGS/bench.txt")"
  cat "$LOGS/bench.txt"
  stamp "$LOGS/bench.json" "$OUT/bench_frames_cuda.json"
}

# The CLIP text encoders at full size (issue 15): random-weight OpenAI CLIP ViT-L/14 (sd15) and OpenCLIP ViT-H/14
# (sd21) written by transformers on this machine, rtvd's fp16 forward against transformers' fp32 hidden states
# (every kernel family, clip skip 0-2), then rtvd bench text and transformers' own fp16 forward at batch 1 and 2,
# in one JSON.
run_text() {
  local d=/tmp/rtvd-clip
  for c in sd15 sd21; do
    (cd "$root" && python3 tools/reference/export_clip_text.py $d/$c --config $c --bench "$LOGS/text_torch_$c.json") \
      >"$LOGS/text_export_$c.log" 2>&1 || note "text: export $c failed: $(tail -1 "$LOGS/text_export_$c.log")"
  done
  run_test env RTVD_CLIP_PARITY_DIR=$d timeout 300 $dir/tests/text_encoder_cuda_test --gtest_brief=1 >"$LOGS/text_parity.log" 2>&1
  local rc=$?
  note "$(printf 'text parity rc=%s %s' $rc "$(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/text_parity.log" | tr '\n' ' ')")"
  grep -E 'rel_l2' "$LOGS/text_parity.log" | grep -E 'sd(15|21)_auto' | sed 's/^/  /'
  for c in sd15 sd21; do
    for b in 1 2; do
      ./rtvd bench text --device cuda --model $d/$c --batch $b --json "$LOGS/text_rtvd_${c}_b$b.json" >"$LOGS/text_bench_${c}_b$b.txt" 2>&1
      note "bench text $c batch $b rc=$? $(grep -E '^forward:' "$LOGS/text_bench_${c}_b$b.txt" | cut -c1-60)"
    done
  done
  python3 - "$LOGS" "$OUT/text_encoder_cuda.json" <<'PY'
import glob, json, os, subprocess, sys
logs, out = sys.argv[1], sys.argv[2]
gpu, driver = subprocess.check_output(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], text=True).strip().split(", ")
rows = []
for c in ("sd15", "sd21"):
    torch_ms = json.load(open(f"{logs}/text_torch_{c}.json"))["transformers_fp16_sdpa_ms"]
    for b in (1, 2):
        r = json.load(open(f"{logs}/text_rtvd_{c}_b{b}.json"))
        t = torch_ms[f"batch{b}"]
        rows.append(dict(config=c, batch=b, rtvd_ms=r["ms_median"], rtvd_tflops=r["tflops"], floor_ms=r["floor_ms"],
                         transformers_fp16_eager_ms=t, speedup=t / r["ms_median"]))
        print(f"text {c} batch {b}: rtvd {r['ms_median']:.3f} ms, transformers {t:.3f} ms ({t / r['ms_median']:.1f}x)")
doc = dict(bench="text", gpu=gpu, driver=driver, commit=r["commit"], date=r["date"], gemm_tflops=r["ceilings"]["gemm_tflops"],
           rows=rows, parity=[l.strip() for l in open(f"{logs}/text_parity.log") if "rel_l2" in l])
json.dump(doc, open(out, "w"), indent=1)
PY
}

# Stable Diffusion end to end (issue 16): a random-weight SD-Turbo-architecture pipeline and TAESD written by
# diffusers on this machine, diffusers' txt2img/img2img frames at 512x512 (fp32), rtvd's the same frames with
# every kernel family (tests/sd_pipeline_cuda_test), then rtvd bench frames of the real-time frame (1 step,
# no guidance) with each autoencoder, and what rtvd info says such a stream needs. Needs the diffusers source
# unpacked at $DIFFUSERS (default /tmp/dif: PYTHONPATH=$DIFFUSERS/src).
run_sd() {
  local d=/tmp/rtvd-sd dif=${DIFFUSERS:-/tmp/dif}
  # Written once per machine (an earlier call, or one started beside the tests, may have made it).
  if [[ ! -f $d/pipelines.json ]]; then
    (cd "$root" && PYTHONPATH=$dif/src python3 tools/reference/export_sd_references.py tests/data/tiny_sd $d \
       --full assets/clip/bpe_simple_vocab_16e6.txt.gz) >"$LOGS/sd_export.log" 2>&1 ||
      note "sd: export failed: $(tail -1 "$LOGS/sd_export.log")"
  fi
  grep -E 'FAILED|pipeline ' "$d/log.txt" | head -20
  run_test env RTVD_SD_PARITY_DIR=$d timeout 400 $dir/tests/sd_pipeline_cuda_test --gtest_brief=1 >"$LOGS/sd_parity.log" 2>&1
  local rc=$?
  note "$(printf 'sd parity rc=%s %s' $rc "$(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/sd_parity.log" | tr '\n' ' ')")"
  grep -E 'sd pipeline full_size.*_auto:' "$LOGS/sd_parity.log" | sed 's/^/  /'
  local common=(--device cuda --model $d/model --size 512 --guidance 0 --frames 300)
  ./rtvd bench frames "${common[@]}" --vae $d/taesd --steps 2 --strength 0.5 --img2img --json "$LOGS/bench_sd_taesd_img2img.json" \
    >"$LOGS/bench_sd_taesd_img2img.txt" 2>&1
  note "bench frames sd-turbo img2img 1 step taesd rc=$? $(grep -E '^frame:' "$LOGS/bench_sd_taesd_img2img.txt")"
  ./rtvd bench frames "${common[@]}" --steps 1 --json "$LOGS/bench_sd_vae_txt2img.json" >"$LOGS/bench_sd_vae_txt2img.txt" 2>&1
  note "bench frames sd-turbo txt2img 1 step vae rc=$? $(grep -E '^frame:' "$LOGS/bench_sd_vae_txt2img.txt")"
  cat "$LOGS/bench_sd_taesd_img2img.txt"
  for b in taesd_img2img vae_txt2img; do stamp "$LOGS/bench_sd_$b.json" "$OUT/bench_sd_$b.json"; done
  ./rtvd info --device cuda --model $d/model --vae $d/taesd --size 512 --steps 1 --guidance 0 >"$LOGS/sd_info.txt" 2>&1
  note "sd info rc=$? $(grep -E 'memory' "$LOGS/sd_info.txt")"
}

# SD 1.5 at full size: a random-weight pipeline written by diffusers, its conversion to one file by diffusers'
# script, and rtvd on both (the single file's architecture inferred from its shapes) against diffusers' frames.
run_sd15() {
  local d=/tmp/rtvd-sd15 dif=${DIFFUSERS:-/tmp/dif}
  if [[ ! -f $d/pipelines.json ]]; then
    (cd "$root" && PYTHONPATH=$dif/src python3 tools/reference/export_sd_references.py tests/data/tiny_sd $d \
       --full assets/clip/bpe_simple_vocab_16e6.txt.gz --arch sd15) >"$LOGS/sd15_export.log" 2>&1 ||
      note "sd15: export failed: $(tail -1 "$LOGS/sd15_export.log")"
  fi
  grep -E 'FAILED|single file' "$d/log.txt" | head -5
  for m in folder file; do
    local model=()
    [[ $m == file ]] && model=(RTVD_SD_PARITY_MODEL=$d/model.safetensors)
    run_test env RTVD_SD_PARITY_DIR=$d "${model[@]}" timeout 300 $dir/tests/sd_pipeline_cuda_test --gtest_brief=1 \
      --gtest_filter='*FullSize*' >"$LOGS/sd15_parity_$m.log" 2>&1
    local rc=$?
    note "$(printf 'sd15 %s parity rc=%s %s' $m $rc "$(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/sd15_parity_$m.log" | tr '\n' ' ')")"
    grep -E 'sd pipeline full_size.*_auto:' "$LOGS/sd15_parity_$m.log" | sed 's/^/  /'
  done
}

# Every kernel and its library alternative at production shapes.
run_kernels() {
  ./rtvd bench kernels --runs 50 --json "$LOGS/kernels.json" 2>&1 | tee "$LOGS/kernels.txt"
  note "bench kernels rc=${PIPESTATUS[0]}"
  stamp "$LOGS/kernels.json" "$OUT/bench_kernels_cuda.json"
}

# The GUI on NVIDIA's GLX under Xvfb (interop path), from .device/gui.tar.xz and .gl/: a screenshot with
# the overlay's per-kernel timings, and the GUI's own line on the display path and frame time.
run_gui() {
  local gdir=/tmp/rtvd-gui
  mkdir -p $gdir && tar -xJf "$root/.device/gui.tar.xz" -C $gdir || { note "gui: no .device/gui.tar.xz"; return; }
  # The default model from the tree: this build embeds a tiny one to fit beside .gl (tools/device-bundle.sh).
  (cd "$root" && source .gl/gl-up.sh && LD_LIBRARY_PATH=$gdir/lib:$LD_LIBRARY_PATH timeout 120 $gdir/rtvd gui --device cuda \
     --model assets/default --no-vsync --frames 600 --screenshot "$OUT/gui_h100.png" >"$LOGS/gui.txt" 2>&1)
  note "gui rc=$? $(tail -1 "$LOGS/gui.txt")"
  cat "$LOGS/gui.txt"
}

# Long fuzz runs on the machine's CPU cores, from .device/fuzz.tar.xz (tools/device-bundle.sh fuzz):
# FUZZ_JOBS="TARGET:WORKERS ..." all at once for FUZZ_SECONDS, each target in libFuzzer's fork mode (-fork=WORKERS:
# child processes on short jobs, new inputs merged into one corpus by the parent) with tools/fuzz.sh's flags. Fork
# mode, not -jobs: 50 -jobs workers reloading one shared corpus ran at a fifth of one worker's rate each
# (docs/fuzzing.md). The executions are the parent's count; each grown corpus comes back in $OUT minimised
# (-merge=1: the inputs that keep its coverage; a whole corpus of whole checkpoints can pass the 16 MiB a file
# may bring back), with the logs. FUZZ_SECONDS leaves a minute of the call's ten for that.
run_fuzz() {
  local fdir=/tmp/rtvd-fuzz
  rm -rf $fdir && mkdir -p $fdir && tar -xJf "$root/.device/fuzz.tar.xz" -C $fdir || { note "fuzz: no .device/fuzz.tar.xz"; return; }
  note "fuzz: commit $(cat $fdir/.commit), tree changes: $(wc -l <$fdir/.tree_status), $(nproc) cores, ${FUZZ_SECONDS:=480} s"
  export ASAN_OPTIONS=quarantine_size_mb=16:malloc_context_size=8  # as tools/fuzz.sh runs them
  local spec t n parser
  for spec in ${FUZZ_JOBS:?FUZZ_JOBS=\"TARGET:WORKERS ...\"}; do
    t=${spec%:*} n=${spec#*:} parser=${t%_fuzzer} parser=${parser%_structured}
    mkdir -p $fdir/logs $fdir/artifacts
    (cd $fdir && LD_LIBRARY_PATH=$fdir/lib nice -n 5 $fdir/$t -fork=$n -max_total_time=$FUZZ_SECONDS -max_len=65536 \
       -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 -artifact_prefix=$fdir/artifacts/$t- \
       $fdir/corpus/$t $fdir/seeds/$parser $fdir/regressions/$parser >$fdir/logs/$t.log 2>&1) &
  done
  wait
  for spec in $FUZZ_JOBS; do
    t=${spec%:*} n=${spec#*:}
    local last
    last=$(grep -E '^#[0-9]+: cov' $fdir/logs/$t.log | tail -1)
    note "$(printf 'fuzz %-30s workers=%s executions=%s crashes=%s corpus=%s inputs, %s; last: %s' $t $n \
      "$(echo "$last" | sed -E 's/^#([0-9]+):.*/\1/')" "$(ls $fdir/artifacts | grep -c "^$t-")" \
      "$(ls $fdir/corpus/$t | wc -l)" "$(du -sh $fdir/corpus/$t | cut -f1)" "$(echo "$last" | cut -d' ' -f2-5)")"
    mkdir -p $fdir/minimised/$t
    (cd $fdir && LD_LIBRARY_PATH=$fdir/lib timeout 60 $fdir/$t -merge=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -malloc_limit_mb=256 $fdir/minimised/$t $fdir/corpus/$t >$fdir/logs/$t.merge.log 2>&1) &
  done
  wait
  for spec in $FUZZ_JOBS; do
    t=${spec%:*}
    if grep -q '^MERGE-OUTER: .* new files' $fdir/logs/$t.merge.log; then
      note "fuzz $t: corpus minimised to $(ls $fdir/minimised/$t | wc -l) inputs, $(du -sh $fdir/minimised/$t | cut -f1)"
      tar -C $fdir/minimised -cJf "$OUT/fuzz_corpus_$t.tar.xz" $t
    else
      note "fuzz $t: the merge did not finish in 60 s; the whole corpus instead"
      tar -C $fdir/corpus -cJf "$OUT/fuzz_corpus_$t.tar.xz" $t
    fi
  done
  cp -r $fdir/artifacts $LOGS/fuzz_artifacts
  mkdir -p $LOGS/fuzz
  for f in $fdir/logs/*.log; do grep -vE '^\s+NEW_FUNC' $f | tail -200 >$LOGS/fuzz/$(basename $f); done
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for what in "${@:-all}"; do
  case $what in
    tests) run_tests ;;
    sanitize) run_sanitizers ;;
    render) run_render ;;
    bench) run_bench ;;
    kernels) run_kernels ;;
    text) run_text ;;
    sd) run_sd ;;
    sd15) run_sd15 ;;
    gui) run_gui ;;
    fuzz) run_fuzz ;;
    all) run_tests; run_render; run_bench ;;
  esac
done
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
tar -C "$LOGS" -czf "$OUT/logs.tar.gz" .
