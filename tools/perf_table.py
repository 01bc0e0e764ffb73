#!/usr/bin/env python3
"""On the GPU machine, one command: the performance table of issue 17, every row rtvd next to its PyTorch /
diffusers counterpart, on the same weights, in one run.

    PYTHONPATH=$DIFFUSERS/src python3 tools/perf_table.py [--work /tmp/rtvd-perf] [--deadline 570]

From the repository root, with the bundle of a CUDA build (tools/device-bundle.sh, unpacked to /tmp/rtvd as
tools/compare_unet.py does) and diffusers' source (../shared/reference/). Steps:
  1. export_sd_references.py --full --weights-only writes a random-weight SD-Turbo-architecture pipeline (SD 2.1's
     U-Net, the SD VAE, OpenCLIP-H) and TAESD, fp16, under --work (skipped when there); then `rtvd bench
     kernels`, the embedded default model's `rtvd bench frames`, and PyTorch's SDPA backends at the same
     attention shapes (tools/reference/bench_torch_attention.py), each alone on the machine.
  2. rtvd's time to first frame: `rtvd render` of one 512x512 frame from that checkpoint with an empty cache
     folder and the checkpoint's files dropped from the page cache.
  3. rtvd on the checkpoint: `bench frames` of the real-time frame (img2img, 1 step, TAESD) and of a txt2img frame
     with the SD VAE (its decode stage), `bench unet` at batch 1 and 2, `bench text` at batch 2.
  4. PyTorch (tools/reference/bench_torch_sd.py), every piece in a process of its own, all started together so
     that torch.compile's minutes overlap, after rtvd's timings: each builds, compiles and warms up, then they
     are timed one at a time. torch.compile (mode "reduce-overhead") for the frame, the U-Net at batch 1 and 2 and
     TAESD; eager in one CUDA graph for those and the VAE decoder and the text encoder; the text encoder eager.
Prints the table and writes $OUT/perf_table.json (GPU, driver, commit, date, each row with its target, and every
benchmark's own JSON) for docs/bench/; the JSON is rewritten after every step, so a run cut short keeps what it
measured. --device cpu runs the rtvd half on a machine without a GPU, from a --work that already holds model/ and
taesd/ (a check of this script; its numbers mean nothing).
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_unet import BUNDLE_DIR, ROOT, machine, sh, unpack_bundle  # noqa: E402

VOCAB = "assets/clip/bpe_simple_vocab_16e6.txt.gz"
TORCH = "tools/reference/bench_torch_sd.py"
# (key, what, mode, batch): the PyTorch processes of step 4; compile ones first, as they take longest.
TORCH_RUNS = [("frame_compile", "frame", "compile", 1), ("unet_b1_compile", "unet", "compile", 1),
              ("unet_b2_compile", "unet", "compile", 2), ("taesd_compile", "taesd", "compile", 1),
              ("frame_graph", "frame", "graph", 1), ("unet_b1_graph", "unet", "graph", 1),
              ("unet_b2_graph", "unet", "graph", 2), ("taesd_graph", "taesd", "graph", 1),
              ("vae_decode_graph", "vae_decode", "graph", 1), ("text_b2_graph", "text", "graph", 2),
              ("text_b2_eager", "text", "eager", 2)]
CONV_CASES = ["sd_64x64_320_film_silu", "sd_32x32_640_film_silu", "sd_16x16_1280_film_silu"]


def start(command, env, log):
    """A process in the background, its output to log."""
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)


def drop_from_page_cache(folder):
    """The files' pages out of the page cache (written back first), so that reading them goes to the disk."""
    os.sync()
    for base, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(base, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def stage_ms(frames, *names, op_timed=False):
    """Summed ms of the named stages of a bench frames JSON, or None: each stage replayed alone as a CUDA graph
    (as PyTorch's rows are timed), or with op_timed (and on the CPU, which has no replay and no events) the
    profile's sums, which on the GPU carry an event between every two ops (~2 us each)."""
    frames = frames or {}
    stages = (None if op_timed else frames.get("stages_alone_per_frame")) or frames.get("stages_per_frame")
    if not stages:
        return None
    return sum(s["ms"] for s in stages if s["stage"] in names)


def kernel_row(kernels, case, impl_prefix):
    """The first timed row of the case whose implementation starts with impl_prefix (refusals have no time)."""
    for r in (kernels or {}).get("results", []):
        if r["case"] == case and r["impl"].startswith(impl_prefix) and "tflops" in r:
            return r
    return None


def table_rows(raw):
    """The issue's rows: what, target, rtvd's number, PyTorch's, the unit, whether the target is met."""
    ms = lambda key, piece: (raw.get(key) or {}).get("ms_median", {}).get(piece)  # noqa: E731
    rows = []

    def row(what, target, rtvd, torch_compile=None, torch_graph=None, unit="ms", met=None, note=""):
        best_torch = min([t for t in (torch_compile, torch_graph) if t], default=None)
        rows.append(dict(what=what, target=target, rtvd=rtvd, torch_compile=torch_compile, torch_graph=torch_graph,
                         unit=unit, speedup=(best_torch / rtvd if rtvd and best_torch and unit == "ms" else None),
                         met=met, note=note))

    frame = raw.get("rtvd_frame_taesd") or {}
    f_ms = frame.get("frame_ms_median")
    f_compile = ms("frame_compile", "frame")
    row("whole 1-step img2img frame, 512², SD-Turbo + TAESD", "≤ 3.9 ms and ≥ 1.6× torch.compile", f_ms, f_compile,
        ms("frame_graph", "frame"),
        met=bool(f_ms and f_ms <= 3.9 and f_compile and f_compile / f_ms >= 1.6) if f_ms and f_compile else None,
        note="host clock per frame, upload to read-back")
    for b, target in ((1, 2.8), (2, 4.0)):
        u = (raw.get(f"rtvd_unet_b{b}") or {}).get("ms_median")
        row(f"SD 2.1 U-Net, batch {b}", f"≤ {target} ms", u, ms(f"unet_b{b}_compile", "unet"), ms(f"unet_b{b}_graph", "unet"),
            met=u <= target if u else None)
    taesd = stage_ms(raw.get("rtvd_frame_taesd"), "encode", "decode")
    t_compile = [ms("taesd_compile", p) for p in ("encode", "decode")]
    t_graph = [ms("taesd_graph", p) for p in ("encode", "decode")]
    taesd_op_timed = stage_ms(raw.get("rtvd_frame_taesd"), "encode", "decode", op_timed=True)
    row("TAESD encode + decode, 512²", "≤ 0.7 ms", taesd, sum(t_compile) if all(t_compile) else None,
        sum(t_graph) if all(t_graph) else None, met=taesd <= 0.7 if taesd else None,
        note=f"rtvd: the frame's encode and decode stages, each replayed alone as a CUDA graph (decode includes the "
        f"blend into RGBA8); op-timed in the frame: {taesd_op_timed} ms")
    vae = stage_ms(raw.get("rtvd_frame_vae"), "decode")
    vae_op_timed = stage_ms(raw.get("rtvd_frame_vae"), "decode", op_timed=True)
    row("full VAE decode, 512²", "≤ 6 ms", vae, None, ms("vae_decode_graph", "decode"), met=vae <= 6 if vae else None,
        note=f"rtvd: the decode stage of a txt2img frame replayed alone as a CUDA graph; op-timed in the frame: "
        f"{vae_op_timed} ms")
    text = (raw.get("rtvd_text_b2") or {}).get("ms_median")
    row("text encoder, OpenCLIP-H, 77 tokens, batch 2", "≤ 1.5 ms", text, None, ms("text_b2_graph", "forward"),
        met=text <= 1.5 if text else None, note=f"transformers eager: {ms('text_b2_eager', 'forward') or '-'} ms")
    kernels = raw.get("rtvd_kernels")
    for case in CONV_CASES:
        ours, cudnn = kernel_row(kernels, case, "default:"), kernel_row(kernels, case, "cuDNN")
        row(f"own conv, {case}", "≥ 500 TFLOP/s", ours and ours["tflops"], None, cudnn and cudnn["tflops"],
            unit="TFLOP/s", met=ours["tflops"] >= 500 if ours else None,
            note=f"{ours['impl'] if ours else ''}; library column: cuDNN through rtvd")
    sdpa = {(r["case"], r["backend"]): r for r in (raw.get("torch_sdpa") or {}).get("results", []) if "tflops" in r}
    for case, sdpa_case, target in (("sd21_64x64", "attn sd21 64x64 5x64 L4096", 450),
                                    ("sd15_64x64_d40", "attn sd15 64x64 8x40 L4096", None)):
        ours, cudnn = kernel_row(kernels, case, "default:"), kernel_row(kernels, case, "cuDNN")
        lib = [r["tflops"] for k, r in sdpa.items() if k[0] == sdpa_case]
        best_lib = max(lib + ([cudnn["tflops"]] if cudnn else []), default=None)
        if target:
            row("flash attention, 4096², head dim 64", "≥ 450 TFLOP/s", ours and ours["tflops"], None, best_lib,
                unit="TFLOP/s", met=ours["tflops"] >= target if ours else None,
                note="library column: the best of cuDNN through rtvd and PyTorch's SDPA backends")
        else:
            row("attention, SD 1.5 head dim 40, 4096²", "≥ cuDNN", ours and ours["tflops"], None, best_lib,
                unit="TFLOP/s", met=ours["tflops"] >= cudnn["tflops"] if ours and cudnn else None,
                note="library column: the best of cuDNN through rtvd and PyTorch's SDPA backends")
    default = raw.get("rtvd_default_frames") or {}
    fps = default.get("frames_per_second")
    row("embedded default model, rtvd bench frames", "≥ 500 frames/s", fps, unit="frames/s",
        met=fps >= 500 if fps else None, note="no PyTorch counterpart run")
    ttff = raw.get("rtvd_first_frame_s")
    compile_first = (raw.get("frame_compile") or {}).get("time_to_first_output_s")
    # rtvd render's own account of it, part by part ("first frame X s after the command started (...)").
    split = next((line for line in raw.get("rtvd_first_frame_output") or [] if line.startswith("first frame ")), "")
    row("time to first frame from a checkpoint on disk, caches empty", "≤ 3 s", ttff,
        compile_first, (raw.get("frame_graph") or {}).get("time_to_first_output_s"), unit="s",
        met=ttff <= 3 if ttff else None, note="rtvd render of one frame, process start to exit; PyTorch: process "
        "start to the first frame, compiling included (while other PyTorch processes compiled beside it)"
        + (f"; rtvd: {split}" if split else ""))
    return rows


def markdown(rows):
    def fmt(v, unit):
        return "–" if v is None else f"{v:.3f}" if unit == "ms" else f"{v:.2f}" if unit == "s" else f"{v:.1f}"
    lines = ["| what | target | rtvd | PyTorch, torch.compile | PyTorch, CUDA graph or library | rtvd's speed-up | met |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        u = r["unit"]
        speedup = "–" if r["speedup"] is None else f"{r['speedup']:.2f}×"
        met = "–" if r["met"] is None else "yes" if r["met"] else "no"
        lines.append(f"| {r['what']} | {r['target']} | {fmt(r['rtvd'], u)} {u} | {fmt(r['torch_compile'], u)} | "
                     f"{fmt(r['torch_graph'], u)} | {speedup} | {met} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/rtvd-perf", help="weights and reports (GBs: not the repo)")
    parser.add_argument("--deadline", type=float, default=570, help="seconds the whole run may take")
    parser.add_argument("--runs", type=int, default=100, help="timed calls per PyTorch measurement")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    begin = time.time()
    left = lambda: args.deadline - (time.time() - begin)  # noqa: E731
    out_dir = os.environ.get("OUT", "/tmp/rtvd-out")
    os.makedirs(out_dir, exist_ok=True)
    w = args.work
    os.makedirs(os.path.join(w, "logs"), exist_ok=True)
    env = unpack_bundle()
    rtvd = os.path.join(BUNDLE_DIR, "rtvd")
    cuda = args.device == "cuda"
    size = "512" if cuda else "64"
    doc = dict(machine() if cuda else {}, bench="perf_table", work=w, raw={}, notes=[], timeline=[])

    def save():
        doc["rows"] = table_rows(doc["raw"])
        doc["table"] = markdown(doc["rows"])
        doc["seconds"] = time.time() - begin
        with open(os.path.join(out_dir, "perf_table.json"), "w") as f:
            json.dump(doc, f, indent=1)

    def note(text):
        doc["notes"].append(text)
        print("==", text, flush=True)

    def mark(what):
        doc["timeline"].append([what, round(time.time() - begin, 1)])
        print(f"-- {time.time() - begin:6.1f} s: {what}", flush=True)

    def rtvd_json(key, command, timeout=120):
        """rtvd with --json into the raw results under key."""
        path = os.path.join(w, f"{key}.json")
        code, out = sh([rtvd] + command + ["--json", path],
                       min(timeout, max(1, left() - 10)), env)
        with open(os.path.join(w, "logs", f"{key}.log"), "w") as f:
            f.write(out)
        doc["raw"][key] = load(path) if code == 0 else None
        if code:
            note(f"{key}: exit {code}: {out.strip().splitlines()[-1] if out.strip() else ''}")
        mark(key)
        save()

    # 1. the checkpoint, then what does not read it
    if not os.path.exists(os.path.join(w, "model", "model_index.json")):
        code, out = sh([sys.executable, "tools/reference/export_sd_references.py", "tests/data/tiny_sd", w, "--full",
                        VOCAB, "--weights-only"], max(1, left() - 120), env)
        with open(os.path.join(w, "logs", "export.log"), "w") as f:
            f.write(out)
        mark("export")
        if code != 0:
            note(f"export_sd_references.py failed ({code}): see {w}/logs/export.log")
            save()
            sys.exit(1)
    model, taesd = os.path.join(w, "model"), os.path.join(w, "taesd")
    device = ["--device", args.device]
    if cuda:
        rtvd_json("rtvd_kernels", ["bench", "kernels", "--runs", "30"], timeout=240)
    rtvd_json("rtvd_default_frames", ["bench", "frames", "--frames", "2000" if cuda else "20"] + device)
    if cuda:
        sdpa = os.path.join(w, "torch_sdpa.json")
        code, out = sh([sys.executable, "tools/reference/bench_torch_attention.py", "--json", sdpa],
                       min(120, left() - 10), env)
        doc["raw"]["torch_sdpa"] = load(sdpa)
        if code:
            note(f"bench_torch_attention.py: exit {code}: {out.strip()[-300:]}")
        mark("torch_sdpa")

    # 2. time to first frame, cold
    cache = os.path.join(w, "empty-cache")
    subprocess.run(["rm", "-rf", cache, os.path.join(w, "first-frame")])
    os.makedirs(cache)
    drop_from_page_cache(model)
    drop_from_page_cache(taesd)
    t0 = time.perf_counter()
    code, out = sh([rtvd, "render", "--device", args.device, "--model", model, "--vae", taesd, "--size", size,
                    "--steps", "1", "--guidance", "0", "--frames", "1", "--prompt", "a lighthouse at dusk", "-o",
                    os.path.join(w, "first-frame") + "/"], 60, dict(env, RTVD_CACHE_DIR=cache))
    doc["raw"]["rtvd_first_frame_s"] = time.perf_counter() - t0 if code == 0 else None
    doc["raw"]["rtvd_first_frame_output"] = out.strip().splitlines()[-3:]
    if code:
        note(f"first frame: exit {code}: {out.strip()[-300:]}")
    mark("rtvd_first_frame")

    # 3. rtvd on the checkpoint
    common = ["--model", model, "--size", size, "--guidance", "0", "--frames", "300" if cuda else "3"] + device
    rtvd_json("rtvd_frame_taesd", ["bench", "frames"] + common + ["--vae", taesd, "--steps", "2", "--strength", "0.5",
                                                                 "--img2img"])
    rtvd_json("rtvd_frame_vae", ["bench", "frames"] + common + ["--steps", "1"])
    for b in (1, 2):
        rtvd_json(f"rtvd_unet_b{b}", ["bench", "unet", "--model", model, "--batch", str(b), "--runs",
                                      "300" if cuda else "1", "--profile"] + device)
    rtvd_json("rtvd_text_b2", ["bench", "text", "--model", model, "--batch", "2", "--runs", "300" if cuda else "1"]
              + device)
    if not cuda:
        save()
        print(doc["table"])
        return

    # 4. PyTorch: all built and compiled at once, then timed one at a time
    sync = os.path.join(w, "sync")
    subprocess.run(["rm", "-rf", sync])
    os.makedirs(sync)
    go, lock = os.path.join(sync, "go"), os.path.join(sync, "lock")
    workers = {}
    for key, what, mode, batch in TORCH_RUNS:
        command = [sys.executable, TORCH, what, model, "--taesd", taesd, "--mode", mode, "--batch", str(batch),
                   "--runs", str(args.runs), "--json", os.path.join(w, f"{key}.json"), "--ready",
                   os.path.join(sync, key), "--go", go, "--lock", lock]
        workers[key] = start(command, dict(env, TORCHINDUCTOR_COMPILE_THREADS="4"), os.path.join(w, "logs", f"{key}.log"))
    mark("pytorch started")
    while left() > 60 and not all(os.path.exists(os.path.join(sync, k)) or p.poll() is not None
                                  for k, p in workers.items()):
        time.sleep(1)
    not_ready = [k for k, p in workers.items() if p.poll() is None and not os.path.exists(os.path.join(sync, k))]
    mark("pytorch ready" + (f" but {', '.join(not_ready)}" if not_ready else ""))
    open(go, "w").close()
    for key, p in workers.items():
        try:
            p.wait(timeout=max(1, left() - 5))
        except subprocess.TimeoutExpired:
            p.kill()
        doc["raw"][key] = load(os.path.join(w, f"{key}.json")) if p.returncode == 0 else None
        if p.returncode != 0:
            with open(os.path.join(w, "logs", f"{key}.log")) as f:
                tail = f.read().strip()[-300:]
            note(f"pytorch {key}: " + ("not ready by the deadline" if key in not_ready else f"exit {p.returncode}: {tail}"))
        save()
    mark("pytorch timed")
    save()
    print(f"\n{doc['gpu']}, driver {doc['driver']}, commit {doc['commit']}, {doc['date']}\n{doc['table']}\n"
          f"wrote {os.path.join(out_dir, 'perf_table.json')} ({doc['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
