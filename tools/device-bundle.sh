#!/usr/bin/env bash
# Here: pack what tools/device-check.sh runs on the GPU machine (git-ignored, sent with the device tool's
# carry), with the BLAS libraries rtvd links, which that machine lacks:
#   tools/device-bundle.sh       .device/bundle.tar.xz: rtvd and the test binaries of build-device
#                                (CUDA for sm_90, no OpenCV, no GUI)
#   tools/device-bundle.sh gui   .device/gui.tar.xz: rtvd of build-device-gui (CUDA, GUI, no OpenCV), run
#                                under Xvfb with NVIDIA's GLX from .gl/ (../shared/DEVICE.md); carry both.
#                                .gl takes 47 of the 64 MiB a call may carry: configure that build with
#                                -DRTVD_DEFAULT_MODEL_DIR=$PWD/tests/data/tiny_batch (a 0.3 MB embedded model)
#                                and pass --model assets/default there
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
what=${1:-tests}
stage=$(mktemp -d)
mkdir -p "$stage/lib" "$root/.device"
if [[ $what == gui ]]; then
  cp "$root/build-device-gui/rtvd" "$stage/"
  out=$root/.device/gui.tar.xz
else
  mkdir -p "$stage/tests"
  cp "$root/build-device/rtvd" "$stage/"
  find "$root/build-device/tests" -maxdepth 1 -type f -name '*_test' -exec cp {} "$stage/tests/" \;
  out=$root/.device/bundle.tar.xz
fi
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do cp -L "/lib/x86_64-linux-gnu/$lib" "$stage/lib/"; done
git -C "$root" rev-parse --short HEAD >"$stage/.commit" 2>/dev/null || true
# A 64 MiB dictionary: the binaries share most of their bytes (the same CUDA kernels in each).
XZ_OPT="-9 -T2" tar -C "$stage" -cJf "$out" .
rm -rf "$stage"
ls -la "$out"
