#!/usr/bin/env python3
"""On the GPU machine, one command: issue 28's speed rows (SDXL-Turbo), rtvd next to diffusers on the same weights.

    PYTHONPATH=$DIFFUSERS/src python3 tools/perf_table_sdxl.py [--work /tmp/rtvd-perf-sdxl] [--deadline 570]

From the repository root, with the bundle of a CUDA build unpacked as tools/perf_table.py does. Steps:
  1. export_tiny_sdxl_pipeline.py --full --weights-only writes a random-weight pipeline of SDXL's published
     architecture (SDXL-Turbo's scheduler) and a TAESDXL, fp16, under --work (skipped when there).
  2. Time to first frame: `rtvd render` of one 1024x1024 frame from that folder with TAESDXL, an empty cache
     folder (RTVD_CACHE_DIR) and, where the machine lets this script, the OS's page cache dropped first; the
     command's own count ("first frame ... after the command started") and the process's wall clock.
  3. rtvd's `bench frames` with TAESDXL: the real-time frame (img2img, 1 step: --steps 2 --strength 0.5
     --guidance 0) at 512x512 and 1024x1024; txt2img at 1024x1024 with the SDXL VAE, whose decode stage
     (replayed alone as a CUDA graph) is the VAE's row.
  4. PyTorch (tools/reference/bench_torch_sd.py), all started together, then timed one at a time: the same frame
     at both sizes, torch.compile (mode "reduce-overhead") and eager in one CUDA graph; AutoencoderKL's decode at
     1024x1024 in one CUDA graph and under torch.compile.
Prints the table (markdown, for the README) and writes $OUT/perf_table_sdxl.json for docs/bench/. --device cpu
runs the rtvd half without a GPU from a --work that holds model/ and taesdxl/ (a check of this script; its numbers
mean nothing), e.g. with tests/data's tiny SDXL:
    mkdir -p /tmp/wx && ln -sfn $PWD/tests/data/tiny_sdxl_pipeline/model /tmp/wx/model &&
    ln -sfn $PWD/tests/data/tiny_taesdxl/taesdxl /tmp/wx/taesdxl
    python3 tools/perf_table_sdxl.py --device cpu --work /tmp/wx --rtvd build-cpu/rtvd
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_unet import sh  # noqa: E402
from perf_table import TORCH, VOCAB, command_line_run, stage_ms  # noqa: E402

SIZES = (512, 1024)
TTFF_SIZE = 1024
# (key, what, mode, size): the PyTorch processes of step 4; compile ones first, as they take longest.
TORCH_RUNS = [("frame_1024_compile", "frame", "compile", 1024), ("frame_512_compile", "frame", "compile", 512),
              ("vae_1024_compile", "vae_decode", "compile", 1024), ("frame_1024_graph", "frame", "graph", 1024),
              ("frame_512_graph", "frame", "graph", 512), ("vae_1024_graph", "vae_decode", "graph", 1024)]


def table_rows(raw):
    """Issue 28's rows, in tools/perf_table.py's row format."""
    got = lambda key: raw.get(key) if isinstance(raw.get(key), dict) else {}  # noqa: E731
    ms = lambda key, piece: got(key).get("ms_median", {}).get(piece)  # noqa: E731
    rows = []

    def row(what, target, rtvd, torch_compile=None, torch_graph=None, unit="ms", met=None, note="", detail="",
            latency=None, against=None):
        """against: PyTorch's time the speed-up is over (its target's), else its best."""
        torch = [t for t in (torch_compile, torch_graph) if t]
        speedup = (against or min(torch)) / rtvd if rtvd and torch else None
        rows.append(dict(what=what, target=target, rtvd=rtvd, torch_compile=torch_compile, torch_graph=torch_graph,
                         unit=unit, speedup=speedup, met=met, note=note, detail=detail,
                         latency_ms=latency[0] if latency else None, latency_frames=latency[1] if latency else None))

    for size in SIZES:
        f = got(f"rtvd_frame_{size}")
        f_ms, tc = f.get("frame_ms_median"), ms(f"frame_{size}_compile", "frame")
        x = tc / f_ms if f_ms and tc else None
        fps = f.get("frames_per_second")
        target = "≥ 1.3× torch.compile" + (", ≥ 40 frames/s" if size == 1024 else "")
        met = x >= 1.3 and (size != 1024 or fps >= 40) if x and fps else None
        row(f"SDXL-Turbo, 1-step img2img frame, {size}², TAESDXL", target, f_ms, tc,
            ms(f"frame_{size}_graph", "frame"), met=met, latency=f_ms and (f_ms, 0), against=tc,
            detail=f"{fps:.0f} frames/s" if fps else "", note="host clock per frame, upload to read-back")

    decode = stage_ms(raw.get("rtvd_vae_1024"), "decode")
    graph = ms("vae_1024_graph", "decode")
    row("SDXL VAE decode, 1024² (4 x 128 x 128 latents)", "≥ 2× PyTorch's CUDA graph", decode,
        ms("vae_1024_compile", "decode"), graph, met=graph / decode >= 2 if decode and graph else None, against=graph,
        note="rtvd: the decode stage of a txt2img frame, replayed alone as a CUDA graph")

    ttff = got("rtvd_first_frame")
    first, wall = ttff.get("first_frame_s"), ttff.get("process_s")
    compile_first = got(f"frame_{TTFF_SIZE}_compile").get("time_to_first_output_s")
    row(f"time to first frame, SDXL folder on disk, {TTFF_SIZE}², caches empty", "≤ 5 s", first, unit="s",
        met=first <= 5 if first else None,
        detail=f"process {wall:.2f} s" if wall else "",
        note=f"rtvd render's own count; page cache {ttff.get('page_cache', 'not measured')}; torch.compile's frame: "
        + (f"first output {compile_first:.0f} s after its process started" if compile_first else "–"))
    return rows


def first_frame(run, model, taesdxl, size):
    """rtvd render of one frame from an empty cache folder, the page cache dropped where allowed: the render's own
    time to its first frame and the process's wall clock, into raw["rtvd_first_frame"]."""
    w = run.work
    subprocess.run(["rm", "-rf", os.path.join(w, "cache"), os.path.join(w, "first_frame")])
    os.makedirs(os.path.join(w, "cache"))
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        page_cache = "dropped"
    except OSError as e:
        page_cache = f"not dropped ({e.strerror}): the weights were just written, so it holds them"
    env = dict(run.env, RTVD_CACHE_DIR=os.path.join(w, "cache"))
    begin = time.time()
    code, out = sh([run.rtvd, "render", "--model", model, "--vae", taesdxl, "--size", size, "--frames", "1",
                    "--steps", "1", "--guidance", "0", "-o", os.path.join(w, "first_frame") + "/"],
                   min(120, max(1, run.left() - 10)), env)
    process_s = time.time() - begin
    run.log("rtvd_first_frame", out)
    m = re.search(r"first frame ([0-9.]+) s after the command started \(([^)]*)\)", out)
    run.doc["raw"]["rtvd_first_frame"] = dict(first_frame_s=float(m.group(1)), steps=m.group(2), process_s=process_s,
                                               page_cache=page_cache) if code == 0 and m else None
    if code or not m:
        run.note(f"rtvd_first_frame: exit {code}: {out.strip()[-300:]}")
    run.mark("rtvd_first_frame")
    run.save()


def main():
    run, args = command_line_run("perf_table_sdxl.json", __doc__.splitlines()[0], "/tmp/rtvd-perf-sdxl", 50, table_rows)
    w, env, cuda = args.work, run.env, args.device == "cuda"

    # 1. the checkpoint
    model, taesdxl = os.path.join(w, "model"), os.path.join(w, "taesdxl")
    if not os.path.exists(os.path.join(model, "model_index.json")):
        code, out = sh([sys.executable, "tools/reference/export_tiny_sdxl_pipeline.py", VOCAB, w, "--full",
                        "--weights-only"], max(1, run.left() - 120), env)
        run.log("export", out)
        run.mark("export")
        if code != 0:
            run.note(f"export_tiny_sdxl_pipeline.py failed ({code}): see {w}/logs/export.log")
            run.save()
            sys.exit(1)

    pixels = lambda size: str(size) if cuda else "64"  # noqa: E731  (the CPU check's tiny model's size)

    # 2. time to first frame, before anything else has read the weights
    first_frame(run, model, taesdxl, pixels(TTFF_SIZE))

    # 3. rtvd's frames
    device = ["--device", args.device]
    for size in SIZES:
        run.rtvd_json(f"rtvd_frame_{size}", ["bench", "frames", "--model", model, "--vae", taesdxl, "--size",
                                             pixels(size), "--frames", "200" if cuda else "3", "--img2img", "--steps",
                                             "2", "--strength", "0.5", "--guidance", "0"] + device)
    run.rtvd_json("rtvd_vae_1024", ["bench", "frames", "--model", model, "--size", pixels(1024), "--frames",
                                    "20" if cuda else "3", "--steps", "1", "--guidance", "0"] + device)
    if not cuda:
        run.finish()
        return

    # 4. PyTorch
    run.torch_runs({key: [sys.executable, TORCH, what, model, "--taesd", taesdxl, "--mode", mode, "--size", str(size),
                          "--runs", str(args.runs)] for key, what, mode, size in TORCH_RUNS})
    run.finish()


if __name__ == "__main__":
    main()
