#!/usr/bin/env bash
# One command from a fresh Debian 12 (as root) to a rendered video or a tested build:
#   tools/quickstart.sh render [rtvd render flags...]   install, build, render out/rtvd.mp4
#   tools/quickstart.sh gui [rtvd gui flags...]         install, build, open the live window
#   tools/quickstart.sh test                            install, build, run the whole test suite
# Idempotent: installed packages and an up-to-date build are left alone.
set -euo pipefail

mode=${1:-render}
shift || true
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${RTVD_BUILD_DIR:-$root/build}

# The GUI and its test: GLFW, Dear ImGui, GL headers; Xvfb with Mesa's GLX and software renderer
# (llvmpipe), named here because --no-install-recommends would not bring them.
packages=(build-essential cmake ninja-build pkg-config zlib1g-dev libopenblas-dev nlohmann-json3-dev
          libgtest-dev libopencv-dev ffmpeg libglfw3-dev libimgui-dev libgl-dev xvfb xauth
          libglx-mesa0 libgl1-mesa-dri)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "quickstart: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -f "$build/build.ninja" ]]; then
  # With a GPU, build for it alone; without one, one architecture (PTX runs on newer GPUs) keeps the
  # compile short. A plain CMake build targets sm_80/86/89/90 (RTVD_CUDA_ARCHITECTURES).
  archs=80
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then archs=native; fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRTVD_CUDA_ARCHITECTURES="$archs"
fi
cmake --build "$build"

case "$mode" in
  render) exec "$build/rtvd" render "$@" ;;
  gui) exec "$build/rtvd" gui "$@" ;;
  test) exec ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@" ;;
  *) echo "usage: tools/quickstart.sh render|gui|test [flags]" >&2; exit 2 ;;
esac
