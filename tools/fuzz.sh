#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (docs/fuzzing.md), built with clang, ASan and UBSan in build-fuzz/.
#   tools/fuzz.sh smoke                     CI: build, then every target from its seeds and regression inputs
#                                           for a fixed number of executions with a fixed seed (one commit,
#                                           one result); fails on any crash or on a target that does not
#                                           finish its executions within RTVD_FUZZ_GUARD_SECONDS (default 900)
#   tools/fuzz.sh long SECONDS [TARGET...]  each target (default all) for SECONDS, one after another at nice 10,
#                                           growing its corpus in build-fuzz/corpus/TARGET (RTVD_FUZZ_RUNS stops
#                                           a target after that many executions)
#   tools/fuzz.sh run TARGET [FLAGS...]     one target over its corpora with libFuzzer's own flags (a crash
#                                           file as FLAGS replays it)
#   tools/fuzz.sh coverage [TARGET...]      line coverage of the parsers over each target's corpora (llvm-cov),
#                                           in build-fuzz-cov/
#   tools/fuzz.sh reach TARGET RUNS FUNC... RUNS executions from the seeds (0: the target's corpus, each input
#                                           once): how many entered each FUNC
#   tools/fuzz.sh build                     configure and build only
# Installs clang and libFuzzer when they are missing (Debian 12, as root, as tools/quickstart.sh does).
# RTVD_FUZZ_JOBS: targets fuzzed at once by smoke (default: the number of cores).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${RTVD_FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(safetensors_fuzzer safetensors_structured_fuzzer model_config_fuzzer model_config_structured_fuzzer
         png_fuzzer png_structured_fuzzer clip_tokenizer_fuzzer clip_tokenizer_structured_fuzzer
         lora_fuzzer lora_structured_fuzzer single_file_fuzzer single_file_structured_fuzzer)

usage() { sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'; }

mode=${1:-}
case "$mode" in
  smoke | long | run | coverage | reach | build) shift ;;
  -h | --help | help) usage; exit 0 ;;
  *) echo "fuzz: unknown mode '$mode' (see tools/fuzz.sh --help)" >&2; exit 2 ;;
esac

# What configuring the tree needs (the root CMakeLists finds OpenMP and BLAS even for the fuzzers, and
# clang's OpenMP is libomp), clang and its libFuzzer and sanitizer runtimes; llvm's tools for coverage.
packages=(cmake ninja-build pkg-config zlib1g-dev nlohmann-json3-dev libopenblas-dev libicu-dev clang libclang-rt-14-dev libomp-dev)
if [[ $mode == coverage || $mode == reach ]]; then packages+=(llvm); fi
# shellcheck source=tools/apt-install.sh
source "$root/tools/apt-install.sh"
apt_install_missing fuzz "${packages[@]}"

# configure DIR [CMAKE FLAGS...]: a clang build of the fuzzers alone; the rest of the tree is not built.
configure() {
  local dir=$1
  shift
  mkdir -p "$dir"
  if [[ ! -f "$dir/build.ninja" ]] &&
     ! cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
         -DCMAKE_CXX_COMPILER=clang++ -DRTVD_WITH_CUDA=OFF -DRTVD_WITH_GUI=OFF -DRTVD_WITH_OPENCV=OFF \
         -DRTVD_WITH_FFMPEG=OFF -DRTVD_BUILD_TESTS=OFF -DRTVD_BUILD_FUZZERS=ON "$@" >"$dir/configure.log" 2>&1; then
    tail -40 "$dir/configure.log"
    echo "fuzz: configuring $dir failed (log: $dir/configure.log)" >&2
    return 1
  fi
  if ! cmake --build "$dir" --target fuzzers -- -j "$(nproc)" >"$dir/build.log" 2>&1; then
    tail -40 "$dir/build.log"
    echo "fuzz: the build failed (log: $dir/build.log)" >&2
    return 1
  fi
}

# What the fuzzers compile of the tree (tests/fuzz/CMakeLists.txt), and the headers that hold their checks.
fuzzed_sources=(pipeline/model_files/json_text.cpp pipeline/model_files/config_reader.cpp pipeline/model_files/safetensors.cpp
                pipeline/model_files/background_read_in.cpp pipeline/model_files/input_file.cpp pipeline/io/output_files.cpp
                pipeline/model_files/model_config.cpp pipeline/graph/weights.cpp pipeline/model_files/tensor_set.cpp
                pipeline/model_files/checkpoint_file.cpp pipeline/model_files/ldm_unet.cpp pipeline/model_files/ldm_vae.cpp
                pipeline/model_files/ldm_text_encoder.cpp pipeline/model_files/single_file.cpp
                pipeline/model_files/controlnet_single_file.cpp pipeline/model_files/lora.cpp
                pipeline/model_files/clip_text_config.cpp pipeline/model_files/diffusers_unet_config.cpp
                pipeline/models/unet_parameters.cpp pipeline/io/png.cpp pipeline/text/clip_tokenizer.cpp
                pipeline/text/unicode_text.cpp pipeline/model_files/json_text.h
                pipeline/model_files/config_reader.h pipeline/model_files/safetensors.h pipeline/model_files/background_read_in.h
                pipeline/model_files/input_file.h pipeline/io/output_files.h
                pipeline/model_files/model_config.h
                pipeline/graph/weights.h pipeline/model_files/tensor_set.h pipeline/model_files/checkpoint_file.h
                pipeline/model_files/ldm_layout.h pipeline/model_files/dotted_name.h pipeline/model_files/single_file.h
                pipeline/model_files/controlnet_single_file.h
                pipeline/model_files/lora.h pipeline/model_files/clip_text_config.h
                pipeline/model_files/diffusers_unet_config.h pipeline/io/png.h pipeline/text/clip_tokenizer.h
                pipeline/text/unicode_text.h base/checked_math.h base/quoted_text.h)

# The smoke pass: a fixed seed and a fixed number of executions per target, about 20 s each on one core of
# the 2-core development machine, so that one commit always gives one result. Random campaigns of hours are
# `long`'s (docs/fuzzing.md); what they find becomes a regression input in tests/data/fuzz/.
# Two more things make a run depend on more than its seed: addresses, and libFuzzer's comparison tracing.
# Heap addresses move between runs (with the address space's randomisation, and with allocations whose size
# depends on the time, such as libFuzzer's own status lines), the parsers compare pointers, and -use_cmp
# turns every 8-byte comparison's operands into dictionary entries that the next mutations insert. So the
# smoke pass runs without randomisation (setarch -R) and with -use_cmp=0; `long` and `run` keep both.
# And one thing depends on the clock: every second (-reload=1) libFuzzer reads its corpus folder again and runs
# what it does not hold (inputs a reduction replaced), so runs of one seed diverged where a second passed
# (model_config_fuzzer in two CI runs of the same sources, 9789ac4 and b31fd7d): -reload=0 in the smoke pass.
smoke_seed=20261127
smoke_flags=(-use_cmp=0 -reload=0)
declare -A smoke_runs=(
  [safetensors_fuzzer]=170000 [safetensors_structured_fuzzer]=12000
  [model_config_fuzzer]=200000 [model_config_structured_fuzzer]=16000
  [png_fuzzer]=150000 [png_structured_fuzzer]=30000
  [clip_tokenizer_fuzzer]=8000 [clip_tokenizer_structured_fuzzer]=1000
  [lora_fuzzer]=8000 [lora_structured_fuzzer]=700
  [single_file_fuzzer]=4500 [single_file_structured_fuzzer]=500)

fixed_layout=()

parser_of() { local t=${1%_fuzzer}; echo "${t%_structured}"; }

check_target() {
  local t
  for t in "${targets[@]}"; do [[ $t == "$1" ]] && return 0; done
  echo "fuzz: unknown target '$1' (expected one of: ${targets[*]})" >&2
  exit 2
}

# The flags every run shares. An input of at most 64 KiB that makes a parser allocate 256 MiB is a defect:
# a parser that allocates only for data it has seen needs at most ~1032x its input (deflate's best ratio).
# A unit slower than 10 s is a hang.
flags=(-max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1)
# A smaller quarantine and shorter allocation stacks than ASan's defaults: a quarter less time per execution
# on the allocation-heavy parsers, and a use-after-free still shows where the memory was allocated.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:malloc_context_size=8}

# fuzz TARGET CORPUS LOG [FLAGS...]: the target over CORPUS (where new inputs land), its seeds and its
# regression inputs (read only); a crash, leak, timeout or OOM leaves its input in build-fuzz/artifacts/.
# The seeds and regression inputs go in as one list sorted by name (-seed_inputs), not as directories:
# libFuzzer shuffles its inputs with its -seed and then sorts them by size, keeping the order of inputs of
# one size, and a directory's order is the file system's (ext4's differs between machines), so with
# directories one seed could give two runs.
fuzz() {
  local target=$1 corpus=$2 log=$3
  shift 3
  local parser
  parser=$(parser_of "$target")
  local dirs=("$root/tests/fuzz/corpus/$parser")
  [[ -d $root/tests/data/fuzz/$parser ]] && dirs+=("$root/tests/data/fuzz/$parser")
  mkdir -p "$corpus" "$build/artifacts" "$(dirname "$log")"
  local list=$build/logs/$target.inputs
  find "${dirs[@]}" -type f | LC_ALL=C sort | paste -sd, >"$list"
  "${fixed_layout[@]}" "$build/tests/fuzz/$target" "${flags[@]}" -artifact_prefix="$build/artifacts/$target-" -seed_inputs=@"$list" \
    "$@" "$corpus" >"$log" 2>&1
}

# A line per finished run: executions, rate, coverage and corpus from libFuzzer's last status line.
summary() {
  local target=$1 log=$2 status=$3
  local last runs
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  printf '%-32s %-6s runs %-10s %s\n' "$target" "$status" "${runs:-?}" \
    "$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9A-Za-z]+' <<<"$last" || true)"
}

failure() {
  local log=$1
  echo "---- $log (crash report) ----"
  grep -vE '^#[0-9]+|^INFO:|^\s*$' "$log" | grep -vE '^    #([3-9][0-9]|[1-9][0-9]{2,}) ' | tail -60
  local unit
  unit=$(grep -o "Test unit written to .*" "$log" | sed 's/Test unit written to //' || true)
  if [[ -n $unit && -f $unit ]]; then
    echo "input: $unit"
    # Small inputs go into the log too, so that a CI failure carries its reproducer.
    (($(stat -c %s "$unit") <= 4096)) && echo "base64: $(base64 -w0 "$unit")"
  fi
  return 0
}

case "$mode" in
  build)
    configure "$build"
    ;;

  smoke)
    start=$SECONDS
    configure "$build"
    echo "fuzz: built in $((SECONDS - start)) s"
    jobs=${RTVD_FUZZ_JOBS:-$(nproc)}
    if setarch -R true 2>/dev/null; then
      fixed_layout=(setarch -R)
    else
      echo "fuzz: setarch -R is refused here: addresses are random, and two runs of one commit may differ"
    fi
    guard=${RTVD_FUZZ_GUARD_SECONDS:-900}
    # Each smoke run starts from the seeds and regression inputs alone: what an earlier run found is not kept.
    rm -rf "$build/corpus-smoke" "$build/logs/smoke.failed"
    mkdir -p "$build/logs"
    for target in "${targets[@]}"; do
      while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
      (log=$build/logs/$target.smoke.log
       runs=${smoke_runs[$target]}
       status=ok
       fuzz "$target" "$build/corpus-smoke/$target" "$log" "${smoke_flags[@]}" -seed="$smoke_seed" -runs="$runs" \
         -max_total_time="$guard" || status=FAILED
       done_runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
       if [[ $status == ok ]] && ((${done_runs:-0} < runs)); then status="SLOW (${done_runs:-0} of $runs in ${guard} s)"; fi
       summary "$target" "$log" "$status"
       if [[ $status != ok ]]; then
         failure "$log"
         echo "$target" >>"$build/logs/smoke.failed"
       fi) &
    done
    wait
    echo "fuzz: smoke took $((SECONDS - start)) s"
    [[ ! -f $build/logs/smoke.failed ]]
    ;;

  long)
    seconds=${1:?usage: tools/fuzz.sh long SECONDS [TARGET...]}
    shift
    (($#)) && selected=("$@") || selected=("${targets[@]}")
    for target in "${selected[@]}"; do check_target "$target"; done
    mkdir -p "$build/logs"
    for target in "${selected[@]}"; do
      # Built again before each target, so that a run of hours fuzzes the tree as it is when it starts; the
      # log begins with the commit and the sources fuzzed.
      configure "$build"
      log=$build/logs/$target.long.$(date +%Y%m%d-%H%M%S).log
      { echo "rtvd fuzz long: $target, $(date -u +%FT%TZ), commit $(git -C "$root" rev-parse --short HEAD)"
        (cd "$root" && git status --short -- "${fuzzed_sources[@]}" && md5sum "${fuzzed_sources[@]}")
      } >"$log"
      status=ok
      start=$SECONDS
      nice -n 10 "$0" run "$target" -max_total_time="$seconds" -runs="${RTVD_FUZZ_RUNS:--1}" >>"$log" 2>&1 ||
        status=FAILED
      summary "$target" "$log" "$status"
      echo "  $((SECONDS - start)) s, log $log"
      [[ $status == ok ]] || failure "$log"
    done
    ;;

  run)
    target=${1:?usage: tools/fuzz.sh run TARGET [FLAGS...]}
    shift
    check_target "$target"
    [[ -x $build/tests/fuzz/$target ]] || configure "$build"
    parser=$(parser_of "$target")
    dirs=("$build/corpus/$target" "$root/tests/fuzz/corpus/$parser")
    [[ -d $root/tests/data/fuzz/$parser ]] && dirs+=("$root/tests/data/fuzz/$parser")
    mkdir -p "${dirs[0]}" "$build/artifacts"
    # A file among the flags is a replay: no corpus directories then.
    for a in "$@"; do [[ -f $a ]] && dirs=(); done
    exec "$build/tests/fuzz/$target" "${flags[@]}" -artifact_prefix="$build/artifacts/$target-" "$@" "${dirs[@]}"
    ;;

  coverage)
    (($#)) && selected=("$@") || selected=("${targets[@]}")
    cov=${RTVD_FUZZ_COV_DIR:-$root/build-fuzz-cov}
    configure "$cov" -DRTVD_FUZZ_COVERAGE=ON
    sources=()
    for f in "${fuzzed_sources[@]}"; do [[ $f == *.cpp ]] && sources+=("$root/$f"); done
    for target in "${selected[@]}"; do
      check_target "$target"
      parser=$(parser_of "$target")
      rm -rf "$cov/profiles/$target" && mkdir -p "$cov/profiles/$target"
      dirs=("$build/corpus/$target" "$root/tests/fuzz/corpus/$parser")
      [[ -d $root/tests/data/fuzz/$parser ]] && dirs+=("$root/tests/data/fuzz/$parser")
      existing=()
      for d in "${dirs[@]}"; do [[ -d $d ]] && existing+=("$d"); done
      # -runs=0 executes each corpus input once and exits; the profile counts every line it ran.
      LLVM_PROFILE_FILE="$cov/profiles/$target/%p.profraw" "$cov/tests/fuzz/$target" -runs=0 \
        -rss_limit_mb=4096 "${existing[@]}" >"$cov/profiles/$target.log" 2>&1 || true
      llvm-profdata merge -sparse "$cov/profiles/$target"/*.profraw -o "$cov/profiles/$target.profdata"
      echo "== $target: $(grep -oE 'corp: [0-9]+/[0-9A-Za-z]+' "$cov/profiles/$target.log" | tail -1) =="
      llvm-cov report "$cov/tests/fuzz/$target" -instr-profile="$cov/profiles/$target.profdata" "${sources[@]}" |
        sed -e "s|$root/||"
    done
    ;;

  reach)
    target=${1:?usage: tools/fuzz.sh reach TARGET RUNS FUNCTION...}
    runs=${2:?usage: tools/fuzz.sh reach TARGET RUNS FUNCTION...}
    shift 2
    check_target "$target"
    cov=${RTVD_FUZZ_COV_DIR:-$root/build-fuzz-cov}
    configure "$cov" -DRTVD_FUZZ_COVERAGE=ON
    parser=$(parser_of "$target")
    work=$cov/reach/$target
    rm -rf "$work" && mkdir -p "$work/corpus" "$work/profiles"
    # RUNS executions from the seeds alone, with a fixed seed, so that raw and structured modes start alike;
    # RUNS 0: each input of the target's corpus (build-fuzz/corpus/TARGET) once.
    if ((runs > 0)); then
      inputs=("$work/corpus" "$root/tests/fuzz/corpus/$parser")
    else
      inputs=("$build/corpus/$target")
    fi
    LLVM_PROFILE_FILE="$work/profiles/%p.profraw" nice -n 10 "$cov/tests/fuzz/$target" "${flags[@]}" \
      -seed=1 -runs="$runs" -artifact_prefix="$work/" "${inputs[@]}" >"$work/log" 2>&1 || true
    llvm-profdata merge -sparse "$work/profiles"/*.profraw -o "$work/profdata"
    # Function entry counts from llvm-cov's JSON export: how many executions got as far as each function.
    llvm-cov export "$cov/tests/fuzz/$target" -instr-profile="$work/profdata" -skip-expansions |
      python3 -c '
import json, subprocess, sys

def is_function(demangled, name):
    """demangled is the function name itself, not a lambda or local class inside it."""
    at = demangled.find("::" + name + "(")
    for start in [0] + ([at + 2] if at >= 0 else []):
        if not demangled.startswith(name + "(", start):
            continue
        depth, i = 0, start + len(name)
        while i < len(demangled):
            depth += {"(": 1, ")": -1}.get(demangled[i], 0)
            if depth == 0:
                return demangled[i + 1:] in ("", " const")
            i += 1
    return False

names = sys.argv[1:]
functions = json.load(sys.stdin)["data"][0]["functions"]
demangled = subprocess.run(["c++filt"], input="\n".join(f["name"] for f in functions), capture_output=True,
                           text=True).stdout.splitlines()
total = sum(f["count"] for f, d in zip(functions, demangled) if d == "LLVMFuzzerTestOneInput")
print(f"executions {total}")
for name in names:
    count = sum(f["count"] for f, d in zip(functions, demangled) if is_function(d, name))
    print(f"{name} {count} ({100.0 * count / max(total, 1):.2f}%)")
' "$@"
    ;;
esac
