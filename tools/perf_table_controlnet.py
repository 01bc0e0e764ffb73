#!/usr/bin/env python3
"""On the GPU machine, one command: issue 29's speed rows (ControlNet), rtvd next to diffusers on the same weights.

    PYTHONPATH=$DIFFUSERS/src python3 tools/perf_table_controlnet.py [--work /tmp/rtvd-perf-cn] [--deadline 570]

From the repository root, with the bundle of a CUDA build unpacked as tools/perf_table.py does. Steps:
  1. export_sd_references.py --full --weights-only writes a random-weight SD-Turbo-architecture pipeline (SD 2.1's
     U-Net) and TAESD, export_tiny_controlnet.py --full --nets-only two full-size random ControlNets of its U-Net,
     fp16, under --work (each skipped when there).
  2. rtvd's `bench frames` with TAESD: the real-time frame (img2img, 1 step: --steps 2 --strength 0.5 --guidance 0)
     without a net, with one (Canny of the source) and with two (Canny and the source itself); each stage replayed
     alone as a CUDA graph gives the ControlNets' and the U-Net's own times; the nets run beside the U-Net's down
     path in the frame (branches of its CUDA graph), so what they cost the frame is its time less the frame's
     without them.
  3. PyTorch (tools/reference/bench_torch_sd.py frame --controlnet), started together, then timed one at a time:
     the same frame with one net and with two, torch.compile (mode "reduce-overhead") and eager in one CUDA
     graph. PyTorch has no Canny on the GPU: its nets get the source image as their control image, so its frame
     leaves out the Canny pass that rtvd's does.
Prints the table (markdown, for the README) and writes $OUT/perf_table_controlnet.json for docs/bench/. --device
cpu runs the rtvd half without a GPU, with the model's own VAE, from a --work that holds model/ and nets/net1,
nets/net2 (a check of this script; its numbers mean nothing), e.g. with tests/data's tiny models:
    mkdir -p /tmp/wc && ln -sfn $PWD/tests/data/tiny_sd /tmp/wc/model && ln -sfn $PWD/tests/data/tiny_controlnet /tmp/wc/nets
    python3 tools/perf_table_controlnet.py --device cpu --work /tmp/wc --rtvd build-cpu/rtvd
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_unet import sh  # noqa: E402
from perf_table import TORCH, VOCAB, command_line_run, stage_ms  # noqa: E402

# rtvd's frames: (key, ControlNet flags)
RTVD_FRAMES = [("rtvd_frame_0", []), ("rtvd_frame_1", ["--controlnet", "NET1", "--control", "canny"]),
               ("rtvd_frame_2", ["--controlnet", "NET1", "--control", "canny", "--controlnet", "NET2", "--control",
                                 "source"])]
# (key, mode, nets): the PyTorch processes of step 3; compile ones first, as they take longest.
TORCH_RUNS = [("frame_1_compile", "compile", 1), ("frame_2_compile", "compile", 2), ("frame_1_graph", "graph", 1),
              ("frame_2_graph", "graph", 2)]


def table_rows(raw):
    """Issue 29's rows, in tools/perf_table.py's row format."""
    got = lambda key: raw.get(key) if isinstance(raw.get(key), dict) else {}  # noqa: E731
    ms = lambda key: got(key).get("ms_median", {}).get("frame")  # noqa: E731
    rows = []

    def row(what, target, rtvd, torch_compile=None, torch_graph=None, unit="ms", met=None, note="", detail="",
            against=None):
        torch = [t for t in (torch_compile, torch_graph) if t]
        speedup = (against or min(torch)) / rtvd if rtvd and torch else None
        rows.append(dict(what=what, target=target, rtvd=rtvd, torch_compile=torch_compile, torch_graph=torch_graph,
                         unit=unit, speedup=speedup, met=met, note=note, detail=detail,
                         latency_ms=rtvd if unit == "ms" and torch else None, latency_frames=0 if torch else None))

    for nets in (1, 2):
        f = got(f"rtvd_frame_{nets}")
        f_ms, tc = f.get("frame_ms_median"), ms(f"frame_{nets}_compile")
        x = tc / f_ms if f_ms and tc else None
        fps = f.get("frames_per_second")
        what = "one ControlNet (Canny of the source)" if nets == 1 else "two ControlNets (Canny, the source)"
        row(f"SD-Turbo 1-step img2img frame, 512², TAESD, {what}", "≥ 1.3× torch.compile" if nets == 1 else "–",
            f_ms, tc, ms(f"frame_{nets}_graph"), met=x >= 1.3 if x and nets == 1 else None, against=tc,
            detail=f"{fps:.0f} frames/s" if fps else "",
            note="host clock per frame, upload to read-back; PyTorch's control image is the source (no Canny)")

    # The nets run beside the U-Net's down path (branches of the frame's graph), so what one costs the frame is the
    # frame's time with it less the frame's without; replayed alone, a net's stage runs its ops one after another.
    frame_ms = lambda nets: got(f"rtvd_frame_{nets}").get("frame_ms_median")  # noqa: E731
    added = lambda nets: frame_ms(nets) - frame_ms(0) if frame_ms(nets) and frame_ms(0) else None  # noqa: E731
    one_cn, unet = stage_ms(raw.get("rtvd_frame_1"), "ControlNet"), stage_ms(raw.get("rtvd_frame_1"), "U-Net")
    row("the ControlNet's own time, batch 1", "≤ 50% of the U-Net's", one_cn,
        met=one_cn / unet <= 0.5 if one_cn and unet else None,
        detail=(f"{100 * one_cn / unet:.0f}% of the U-Net's {unet:.2f} ms" if one_cn and unet else "") +
               (f"; it adds {added(1):.2f} ms to the frame" if added(1) else ""),
        note="stages replayed alone as CUDA graphs")
    two_cn = stage_ms(raw.get("rtvd_frame_2"), "ControlNet")
    row("two ControlNets' time in the frame", "≤ 1.9× one's", added(2),
        met=added(2) / added(1) <= 1.9 if added(1) and added(2) else None,
        detail=(f"{added(2) / added(1):.2f}× one's {added(1):.2f} ms" if added(1) and added(2) else "") +
               (f"; replayed alone {two_cn:.2f} ms, {two_cn / one_cn:.2f}× one's" if one_cn and two_cn else ""),
        note="the frame with the nets less the frame without; the second net's control is the source: no Canny")
    return rows


def main():
    run, args = command_line_run("perf_table_controlnet.json", __doc__.splitlines()[0], "/tmp/rtvd-perf-cn", 100,
                                 table_rows)
    w, env, cuda = args.work, run.env, args.device == "cuda"

    # 1. the checkpoint and the nets
    model, taesd, nets = os.path.join(w, "model"), os.path.join(w, "taesd"), os.path.join(w, "nets")
    exports = [("export_model", model, ["tools/reference/export_sd_references.py", "tests/data/tiny_sd", w, "--full",
                                        VOCAB, "--weights-only"]),
               ("export_nets", nets, ["tools/reference/export_tiny_controlnet.py", model, nets, "--full",
                                      "--nets-only"])]
    for key, made, command in exports:
        if os.path.exists(made):
            continue
        code, out = sh([sys.executable] + command, max(1, run.left() - 120), env)
        run.log(key, out)
        run.mark(key)
        if code != 0:
            run.note(f"{key} failed ({code}): see {w}/logs/{key}.log")
            run.save()
            sys.exit(1)

    # 2. rtvd's frames
    net = {"NET1": os.path.join(nets, "net1"), "NET2": os.path.join(nets, "net2")}
    for key, flags in RTVD_FRAMES:
        vae = ["--vae", taesd] if cuda else []  # the CPU check: tiny_sd's own VAE, which the tiny nets are made for
        run.rtvd_json(key, ["bench", "frames", "--model", model] + vae + ["--size", "512" if cuda else "32",
                            "--frames", "300" if cuda else "3", "--img2img", "--steps", "2", "--strength", "0.5",
                            "--guidance", "0", "--device", args.device] + [net.get(f, f) for f in flags])
    if not cuda:
        run.finish()
        return

    # 3. PyTorch
    run.torch_runs({key: [sys.executable, TORCH, "frame", model, "--taesd", taesd, "--mode", mode, "--runs",
                          str(args.runs)] + ["--controlnet", net["NET1"]] + (["--controlnet", net["NET2"]] if n == 2
                                                                              else [])
                    for key, mode, n in TORCH_RUNS})
    run.finish()


if __name__ == "__main__":
    main()
