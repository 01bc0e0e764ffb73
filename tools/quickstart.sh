#!/usr/bin/env bash
# One command from a fresh Debian 12 (as root) to a rendered video or a tested build. Idempotent: installed
# packages and an up-to-date build are left alone. Usage below (tools/quickstart.sh --help).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/quickstart.sh render|gui|test [flags]
  render [rtvd render flags]  install what is missing, build rtvd, render (default out/rtvd.mp4)
  gui [rtvd gui flags]        install what is missing, build rtvd, open the live window
  test [ctest flags]          install what is missing, build everything, run the whole test suite
With no mode: render. render and gui build the rtvd binary alone: in build/ for this machine's GPU when
nvidia-smi sees one, else CPU-only in build-cpu/ (no CUDA code compiled). test builds build/ whole, with
the CUDA code (for this GPU, else sm_80) where there is a CUDA toolkit. RTVD_BUILD_DIR names another build
directory.
EOF
}

# Usage is settled before anything is installed or built.
mode=${1:-render}
case "$mode" in
  -h | --help | help) usage; exit 0 ;;
  render | gui | test) ;;
  *) echo "quickstart: unknown mode '$mode' (expected render, gui or test; see tools/quickstart.sh --help)" >&2
     exit 2 ;;
esac
shift || true
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# libav*: recording. The GUI and its test: GLFW, Dear ImGui, GL headers; Xvfb with Mesa's GLX and
# software renderer (llvmpipe), named here because --no-install-recommends would not bring them.
packages=(build-essential cmake ninja-build pkg-config zlib1g-dev libicu-dev libopenblas-dev nlohmann-json3-dev
          libgtest-dev libopencv-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev ffmpeg
          libglfw3-dev libimgui-dev libgl-dev xvfb xauth libglx-mesa0 libgl1-mesa-dri)
# shellcheck source=tools/apt-install.sh
source "$root/tools/apt-install.sh"
apt_install_missing quickstart "${packages[@]}"

gpu=no
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then gpu=yes; fi

# test, and render/gui with a GPU: the full build in build/, CUDA for this GPU alone, or for sm_80 alone
# without one (PTX runs on newer GPUs) to keep the compile short; a plain CMake build targets
# sm_80/86/89/90a (RTVD_CUDA_ARCHITECTURES). render/gui without a GPU: no CUDA and no tests, most of the
# full build's time on a small machine.
if [[ $mode == test || $gpu == yes ]]; then
  build=${RTVD_BUILD_DIR:-$root/build}
  archs=80
  if [[ $gpu == yes ]]; then archs=native; fi
  configure=(-DRTVD_CUDA_ARCHITECTURES="$archs")
else
  build=${RTVD_BUILD_DIR:-$root/build-cpu}
  configure=(-DRTVD_WITH_CUDA=OFF -DRTVD_BUILD_TESTS=OFF)
fi
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${configure[@]}"
fi

case "$mode" in
  render) cmake --build "$build" --target rtvd && exec "$build/rtvd" render "$@" ;;
  gui) cmake --build "$build" --target rtvd && exec "$build/rtvd" gui "$@" ;;
  test) cmake --build "$build" && exec ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@" ;;
esac
