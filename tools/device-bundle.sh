#!/usr/bin/env bash
# Here: pack what tools/device-check.sh runs on the GPU machine into .device/bundle.tar.xz (git-ignored):
# the rtvd binary and test binaries of a CUDA build without OpenCV, plus the BLAS libraries it links,
# which that machine lacks. Send it with the device tool's carry: [".device"].
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build-device}
stage=$(mktemp -d)
mkdir -p "$stage/tests" "$stage/lib" "$root/.device"
cp "$build/rtvd" "$stage/"
find "$build/tests" -maxdepth 1 -type f -name '*_test' -exec cp {} "$stage/tests/" \;
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do cp -L "/lib/x86_64-linux-gnu/$lib" "$stage/lib/"; done
git -C "$root" rev-parse --short HEAD >"$stage/.commit" 2>/dev/null || true
tar -C "$stage" -cJf "$root/.device/bundle.tar.xz" .
rm -rf "$stage"
ls -la "$root/.device/bundle.tar.xz"
