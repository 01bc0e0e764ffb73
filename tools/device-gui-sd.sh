#!/usr/bin/env bash
# On the GPU machine: the GUI with a full-size SD-Turbo-architecture model (random weights, written by
# diffusers) and TAESD at 512x512, under Xvfb with NVIDIA's GLX, one frame at a time and with stream batches
# of 2 and 4: a screenshot and the exit line of each. `run controlnet` instead: one frame at a time with a
# full-size random ControlNet on Canny edges of the source, at scale 1 and at scale 0 (the net off). What travels does not fit one call (.gl ~48 MB, the GUI
# bundle ~17 MB, the tree ~29 MB; 64 MiB a call), so two calls on one warm machine:
#   setup  carry .gl and .device (diffusers.tar.xz only), with tests/data, assets/default and docs/*.png moved
#          out of the tree for the call: unpacks .gl into /opt/gl, writes the model into /tmp/w
#   run    carry .device (gui.tar.xz from tools/device-bundle.sh gui, nothing larger), the whole tree, right
#          after: starts Xvfb again and runs the GUI three times
set -u
case ${1:-} in
  setup)
    source .gl/gl-up.sh && cp .gl/gl-up.sh /tmp/gl-up.sh
    mkdir -p /tmp/dif && tar -xJf .device/diffusers.tar.xz -C /tmp/dif
    PYTHONPATH=/tmp/dif/src python3 tools/reference/export_sd_references.py /tmp/none /tmp/w --full \
      assets/clip/bpe_simple_vocab_16e6.txt.gz --weights-only 2>&1 | tail -1
    PYTHONPATH=/tmp/dif/src python3 tools/reference/export_tiny_controlnet.py /tmp/w/model /tmp/w/nets --full \
      --nets-only 2>&1 | tail -1
    ;;
  run)
    [[ -x /opt/gl/usr/bin/Xvfb && -d /tmp/w/model ]] || { echo "not set up on this machine: run setup first"; exit 3; }
    dir=/tmp/rtvd-gui
    rm -rf $dir && mkdir -p $dir && tar -xJf .device/gui.tar.xz -C $dir
    rm -f /tmp/.X11-unix/X99 /tmp/.X99-lock  # the setup call's Xvfb ended with it
    source /tmp/gl-up.sh
    export LD_LIBRARY_PATH=$dir/lib:$LD_LIBRARY_PATH
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    c=(gui --device cuda --model /tmp/w/model --vae /tmp/w/taesd --source image:docs/gui.png --steps 2 --strength 0.5
       --guidance 0 --prompt "a watercolor fox" --no-vsync --frames 1500)
    if [[ ${2:-} == controlnet ]]; then
      for scale in 1 0; do
        timeout 150 $dir/rtvd "${c[@]}" --controlnet /tmp/w/nets/net1:$scale --control canny \
          --screenshot "$OUT/gui_sd_controlnet$scale.png" >"$OUT/gui_sd_controlnet$scale.txt" 2>&1
        echo "ControlNet at scale $scale: rc=$? $(tail -1 "$OUT/gui_sd_controlnet$scale.txt")"
      done
      exit 0
    fi
    for k in 1 2 4; do
      timeout 150 $dir/rtvd "${c[@]}" --stream-batch $k --screenshot "$OUT/gui_sd_stream$k.png" >"$OUT/gui_sd_stream$k.txt" 2>&1
      echo "stream batch $k: rc=$? $(tail -1 "$OUT/gui_sd_stream$k.txt")"
    done
    ;;
  *) echo "usage: tools/device-gui-sd.sh setup|run [controlnet]"; exit 2 ;;
esac
