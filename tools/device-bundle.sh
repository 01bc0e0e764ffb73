#!/usr/bin/env bash
# Here: pack what tools/device-check.sh runs on the GPU machine (git-ignored, sent with the device tool's
# carry), with the BLAS and ICU libraries rtvd links, which that machine lacks:
#   tools/device-bundle.sh [tests [TEST...]]
#                                .device/bundle.tar.xz: rtvd and the GPU test binaries of build-device
#                                (CUDA for sm_90, no OpenCV, no GUI), or only the TESTs named (as
#                                group_norm_test): all of them (~30 MB) and the tree (~42 MB) pass the 64 MiB
#                                a call may carry. Not the data the build copies beside them (tests/data/ and
#                                assets/, 23 MB), which the call's tree carries already: tools/device-check.sh
#                                links them in beside the binaries
#   tools/device-bundle.sh gui   .device/gui.tar.xz: rtvd of build-device-gui (CUDA, GUI, no OpenCV), run
#                                under Xvfb with NVIDIA's GLX from .gl/ (../shared/DEVICE.md); carry both.
#                                .gl takes 47 of the 64 MiB a call may carry: configure that build with
#                                -DRTVD_DEFAULT_MODEL_DIR=$PWD/tests/data/tiny_batch (a 0.3 MB embedded model)
#                                and pass --model assets/default there
#   tools/device-bundle.sh fuzz TARGET...
#                                .device/fuzz.tar.xz: those fuzzers of build-fuzz (tools/fuzz.sh build), each
#                                with its corpus so far, seeds and regression inputs, for long runs on that
#                                machine's CPU cores (tools/device-check.sh fuzz)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
what=${1:-tests}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$root/.device"
if [[ $what == gui ]]; then
  cp "$root/build-device-gui/rtvd" "$stage/"
  out=$root/.device/gui.tar.xz
elif [[ $what == fuzz ]]; then
  shift
  for target in "$@"; do
    parser=${target%_fuzzer}
    parser=${parser%_structured}
    cp "$root/build-fuzz/tests/fuzz/$target" "$stage/"
    mkdir -p "$stage/corpus/$target" "$stage/seeds/$parser" "$stage/regressions/$parser"
    cp -r "$root/tests/fuzz/corpus/$parser/." "$stage/seeds/$parser/"
    if [[ -d $root/build-fuzz/corpus/$target ]]; then cp -r "$root/build-fuzz/corpus/$target/." "$stage/corpus/$target/"; fi
    if [[ -d $root/tests/data/fuzz/$parser ]]; then cp -r "$root/tests/data/fuzz/$parser/." "$stage/regressions/$parser/"; fi
  done
  # What the run fuzzes: the commit, and any change to the tree beside it.
  git -C "$root" status --short >"$stage/.tree_status"
  out=$root/.device/fuzz.tar.xz
elif [[ $what != tests ]]; then
  echo "usage: tools/device-bundle.sh [tests [TEST...] | gui | fuzz TARGET...]" >&2
  exit 2
else
  mkdir -p "$stage/tests"
  cp "$root/build-device/rtvd" "$stage/"
  # The test binaries that tools/device-check.sh runs there (the GPU suites, the op tests of tests/ops, the
  # engine and golden tests), among those ctest knows in this build (not whatever an older tree left in the
  # folder): the CPU-only suites would take the bundle past what a call may carry.
  gpu_tests="_cuda_test|/engine_test|/unet_golden_test|/similarity_filter_test|/feature_cache_test|/canny_graph_test$(for f in "$root"/tests/ops/*_test.cpp; do printf '|/%s' "$(basename "$f" .cpp)"; done)"
  if [[ $# -gt 1 ]]; then  # only the tests named: each must be one of those
    shift
    named=$(printf '|/%s' "$@")
    re="($gpu_tests)\$"
    for test in "$@"; do
      [[ -x $root/build-device/tests/$test && /$test =~ $re ]] ||
        { echo "device-bundle: $test is no GPU test binary of build-device" >&2; exit 1; }
    done
    gpu_tests=${named#|}
  fi
  ctest --test-dir "$root/build-device" --show-only=json-v1 | grep -o '"/[^"]*/tests/[a-z0-9_]*_test"' | tr -d '"' |
    sort -u | grep -E "($gpu_tests)\$" | xargs -I{} cp {} "$stage/tests/"
  out=$root/.device/bundle.tar.xz
fi
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libicuuc.so.72 libicudata.so.72; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$stage/lib/"
done
git -C "$root" rev-parse --short HEAD >"$stage/.commit" 2>/dev/null || true
# A 64 MiB dictionary over one stream (one thread): the binaries share most of their bytes (the same CUDA kernels
# in each), which two threads' separate blocks would not see (40 MB against 30 for all the tests).
XZ_OPT="-9e -T1" tar -C "$stage" -cJf "$out" .
ls -la "$out"
