#!/usr/bin/env bash
# shellcheck disable=SC2016  # the stand-ins' bodies are single-quoted on purpose
# tools/quickstart.sh without installing or building anything: a copy of it runs in a scratch repository
# with stand-ins first on PATH for every program it may call (dpkg-query, apt-get, nvidia-smi, cmake,
# ctest), which log their arguments. Usage and a mistyped mode must be answered before any of them runs;
# render and gui build only the rtvd target, CPU-only in build-cpu/ without a GPU; test builds build/ whole.
#   tests/quickstart_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: tests/quickstart_test.sh SOURCE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

repo=$tmp/repo stubs=$tmp/stubs log=$tmp/calls
mkdir -p "$repo/tools" "$stubs"
cp "$src/tools/quickstart.sh" "$src/tools/apt-install.sh" "$repo/tools/"
# Each stand-in logs "name args..."; dpkg-query says every package is installed unless STUB_MISSING is set,
# nvidia-smi sees a GPU when STUB_GPU is set, apt-get install fails (nothing may be installed here), the
# configure step leaves an rtvd stand-in in the build directory for the script's exec. Their bodies are
# single-quoted: they expand when the stand-ins run.
stub() { printf '#!/usr/bin/env bash\necho "%s $*" >>"%s"\n%s\n' "$1" "$log" "$2" >"$stubs/$1"; chmod +x "$stubs/$1"; }
stub dpkg-query '[[ -z ${STUB_MISSING:-} ]] && echo "install ok installed"; exit 0'
stub apt-get '[[ $1 != install ]] || exit 97'
stub nvidia-smi '[[ -n ${STUB_GPU:-} ]]'
stub ctest 'exit 0'
stub cmake '
while (($#)); do
  if [[ $1 == -B ]]; then mkdir -p "$2" && printf "#!/bin/sh\necho \"rtvd \$*\" >>%s\n" "'"$log"'" >"$2/rtvd" && chmod +x "$2/rtvd"; fi
  shift
done'

# Runs the copy with the stand-ins first on PATH; sets rc, out, err and calls (the log, one call a line).
run() {
  rm -f "$log" && touch "$log"
  rc=0
  (cd "$tmp" && env PATH="$stubs:$PATH" "${env[@]}" "$repo/tools/quickstart.sh" "$@" >"$tmp/out" 2>"$tmp/err") || rc=$?
  out=$(<"$tmp/out") err=$(<"$tmp/err") calls=$(<"$log")
}
env=()

for help in --help -h help; do
  run "$help"
  [[ $rc == 0 ]] || fail "$help: exit $rc, expected 0"
  [[ $out == "usage: tools/quickstart.sh render|gui|test [flags]"* ]] || fail "$help: no usage on stdout: $out"
  [[ -z $calls ]] || fail "$help ran programs before printing usage: $calls"
done

run rendr --frames 2
[[ $rc == 2 ]] || fail "a mistyped mode: exit $rc, expected 2"
[[ $err == "quickstart: unknown mode 'rendr' (expected render, gui or test; see tools/quickstart.sh --help)" ]] ||
  fail "a mistyped mode: stderr is not the one error line: $err"
[[ -z $calls ]] || fail "a mistyped mode ran programs: $calls"

# The stand-ins are on the path the script uses: a missing package reaches apt-get (which fails).
env=(STUB_MISSING=1)
run render
[[ $rc == 97 && $calls == *"apt-get install"*libavformat-dev* ]] ||
  fail "a missing package did not reach apt-get install with the libav* packages (exit $rc): $calls"

env=()
run render --frames 2
[[ $rc == 0 ]] || fail "render without a GPU: exit $rc: $err"
[[ $calls == *"cmake -S $repo -B $repo/build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DRTVD_WITH_CUDA=OFF -DRTVD_BUILD_TESTS=OFF"* ]] ||
  fail "render without a GPU is not configured CPU-only in build-cpu: $calls"
[[ $calls == *"cmake --build $repo/build-cpu --target rtvd"* ]] || fail "render does not build the rtvd target alone: $calls"
[[ $calls == *"rtvd render --frames 2" ]] || fail "render does not pass its flags on: $calls"

env=(STUB_GPU=1)
run gui --window 800
[[ $rc == 0 ]] || fail "gui with a GPU: exit $rc: $err"
[[ $calls == *"-B $repo/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRTVD_CUDA_ARCHITECTURES=native"* ]] ||
  fail "gui with a GPU is not configured for it in build: $calls"
[[ $calls == *"cmake --build $repo/build --target rtvd"* && $calls == *"rtvd gui --window 800" ]] ||
  fail "gui does not build the rtvd target alone and run the window: $calls"

env=()
run test -R cli
[[ $rc == 0 ]] || fail "test: exit $rc: $err"
[[ $calls == *"-B $repo/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRTVD_CUDA_ARCHITECTURES=80"* ]] ||
  fail "test without a GPU does not configure build with the CUDA code for sm_80: $calls"
[[ $calls == *"cmake --build $repo/build"$'\n'* && $calls == *"ctest --test-dir $repo/build"*"-R cli" ]] ||
  fail "test does not build everything and run ctest with its flags: $calls"

env=(RTVD_BUILD_DIR="$tmp/elsewhere")
run render
[[ $calls == *"-B $tmp/elsewhere "* && $calls == *"cmake --build $tmp/elsewhere --target rtvd"* ]] ||
  fail "RTVD_BUILD_DIR is not the build directory: $calls"

((failures == 0)) && echo "quickstart: all checks passed"
exit $((failures > 0))
