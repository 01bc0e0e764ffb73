#!/usr/bin/env python3
"""On the GPU machine, one command: the performance table of issue 27, every row rtvd next to its PyTorch /
diffusers counterpart where it has one, on the same weights, in one run.

    PYTHONPATH=$DIFFUSERS/src python3 tools/perf_table.py [--work /tmp/rtvd-perf] [--deadline 570]

From the repository root, with the bundle of a CUDA build (tools/device-bundle.sh, unpacked to /tmp/rtvd as
tools/compare_unet.py does) and diffusers' source (../shared/reference/). Steps:
  1. export_sd_references.py --full --weights-only writes a random-weight SD-Turbo-architecture pipeline (SD 2.1's
     U-Net, the SD VAE, OpenCLIP-H) and TAESD, fp16, under --work (skipped when there); then `rtvd bench
     kernels`, the embedded default model's `rtvd bench frames`, and PyTorch's SDPA backends at the same
     attention shapes (tools/reference/bench_torch_attention.py), each alone on the machine.
  2. rtvd on the checkpoint, `bench frames` with TAESD: the real-time frame (img2img, 1 step) one at a time
     (latency mode), with --stream-batch 2, 3 and 4 (throughput mode), with --feature-cache 3 on a moving source
     (--moving: a pan over a picture; the run also gives the cached frames' error against the uncached ones), with
     --skip-similar 0.999 on a static source (one fixed image) and on the moving one; LCM's 4-step txt2img frame
     one at a time and with --stream-batch 4; `bench unet` at batch 1 and 2. A flag the binary does not know makes
     its row "not built".
  3. PyTorch (tools/reference/bench_torch_sd.py), every piece in a process of its own, all started together so
     that torch.compile's minutes overlap, after rtvd's timings: each builds, compiles and warms up, then they
     are timed one at a time. torch.compile (mode "reduce-overhead") and eager in one CUDA graph, each for the
     frame at 1, 2, 3 and 4 frames per call (throughput mode's K-frame batching) and the U-Net at batch 1 and 2.
Prints the table (markdown, for the README) and writes $OUT/perf_table.json (GPU, driver, commit, date, each row
with its target, and every benchmark's own JSON) for docs/bench/; the JSON is rewritten after every step, so a run
cut short keeps what it measured. --device cpu runs the rtvd half on a machine without a GPU (a check of this
script; its numbers mean nothing), from a --work that already holds model/ and taesd/ and with --rtvd naming a
binary, e.g. with tests/data's tiny models:
    mkdir -p /tmp/w && ln -sfn $PWD/tests/data/tiny_sd /tmp/w/model && ln -sfn $PWD/tests/data/tiny_taesd /tmp/w/taesd
    python3 tools/perf_table.py --device cpu --work /tmp/w --rtvd build-cpu/rtvd
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_unet import BUNDLE_DIR, ROOT, machine, sh, unpack_bundle  # noqa: E402

VOCAB = "assets/clip/bpe_simple_vocab_16e6.txt.gz"
TORCH = "tools/reference/bench_torch_sd.py"
STREAM_BATCHES = (2, 3, 4)  # K = 3: the most frames in flight within the target's 2 frames of added latency
# (key, what, mode, batch): the PyTorch processes of step 3; compile ones first, as they take longest. frame's batch
# is its frames per call: one, and each stream batch's, the largest first.
TORCH_RUNS = [run for mode in ("compile", "graph") for run in
              [(f"frame_{mode}" if k == 1 else f"frame_b{k}_{mode}", "frame", mode, k)
               for k in (1, *sorted(STREAM_BATCHES, reverse=True))] +
              [(f"unet_b{b}_{mode}", "unet", mode, b) for b in (1, 2)]]
CONV_CASES = ["sd_64x64_320_film_silu", "sd_32x32_640_film_silu", "sd_16x16_1280_film_silu"]
SKIP_SIMILAR = "0.999"  # the GUI's default threshold
FEATURE_CACHE = "3"     # frames between refreshes of the deep features
NOT_BUILT = "not built"  # a row whose flag this binary does not know


def start(command, env, log):
    """A process in the background, its output to log, in a process group of its own (stop() ends its children
    too: torch.compile's worker processes)."""
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(process):
    """Ends a process of start() and every process it started."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


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


def stages_ms(frames):
    """The frame's stages summed, each replayed alone (or, without that, op-timed), or None."""
    stages = (frames or {}).get("stages_alone_per_frame") or (frames or {}).get("stages_per_frame")
    return sum(s["ms"] for s in stages) if stages else None


def find_keys(doc, word, path=""):
    """{dotted path: value} of every key of a JSON document whose name holds word."""
    found = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            here = f"{path}.{k}" if path else k
            if word in k:
                found[here] = v
            found.update(find_keys(v, word, here))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found.update(find_keys(v, word, f"{path}[{i}]"))
    return found


def cache_error(fc):
    """The feature cache's error against the uncached frames from a bench frames --moving JSON, in words."""
    e = (fc or {}).get("feature_cache")
    if not isinstance(e, dict) or "rms_levels" not in e:
        return "no error measured"
    db = lambda v: "identical" if v is None else f"{v:.1f} dB"  # noqa: E731
    return (f"error against the uncached frames over {e['error_frames']} frames from the same start "
            f"({e['full_frames']} full, {e['source_refreshes']} of them by the source): PSNR "
            f"{db(e['psnr_db_all_frames'])} over all frames, worst frame {db(e['psnr_db_worst'])}; RMS "
            f"{e['rms_levels_mean']:.2f} levels of 255 on average, worst {e['rms_levels_worst']:.2f}; random weights, "
            "so it says nothing of real frames")


def table_rows(raw):
    """Issue 27's rows: what, target, rtvd's number (its latency where it is a frame), PyTorch's, the unit, whether
    the target is met. raw[key] is None where the run failed, NOT_BUILT where the binary lacks the flag."""
    def got(key):
        v = raw.get(key)
        return v if isinstance(v, dict) else {}

    ms = lambda key, piece: got(key).get("ms_median", {}).get(piece)  # noqa: E731
    fps = lambda v: 1e3 / v if v else None  # noqa: E731
    rows = []

    def row(what, target, rtvd, torch_compile=None, torch_graph=None, unit="ms", met=None, note="", detail="",
            latency=None, **extra):
        """latency: (ms, frames after its source) of a frame row. rtvd's speed-up: PyTorch's best time over rtvd's,
        or rtvd's frames/s over PyTorch's best."""
        torch = [t for t in (torch_compile, torch_graph) if t]
        speedup = None
        if rtvd and torch and unit == "ms":
            speedup = min(torch) / rtvd
        elif rtvd and torch and unit == "frames/s":
            speedup = rtvd / max(torch)
        rows.append(dict(what=what, target=target, rtvd=rtvd, torch_compile=torch_compile, torch_graph=torch_graph,
                         unit=unit, speedup=speedup, met=met, note=note, detail=detail,
                         latency_ms=latency[0] if latency else None, latency_frames=latency[1] if latency else None,
                         **extra))

    # latency mode
    frame = got("rtvd_frame")
    f_ms = frame.get("frame_ms_median")
    row("latency mode: 1-step img2img frame, 512², SD-Turbo + TAESD", "≤ 4.0 ms", f_ms, ms("frame_compile", "frame"),
        ms("frame_graph", "frame"), met=f_ms <= 4.0 if f_ms else None, latency=f_ms and (f_ms, 0),
        detail=f"{frame['frames_per_second']:.0f} frames/s" if f_ms else "",
        note="host clock per frame, upload to read-back, one frame at a time")
    for b, target in ((1, 3.0), (2, None)):
        u = got(f"rtvd_unet_b{b}").get("ms_median")
        row(f"SD 2.1 U-Net, batch {b}", f"≤ {target} ms" if target else "– (throughput mode's K = 2)", u,
            ms(f"unet_b{b}_compile", "unet"), ms(f"unet_b{b}_graph", "unet"),
            met=(u <= target if u else None) if target else None)

    # throughput mode: rtvd's stream batch, then against PyTorch's K-frame batches
    streams = {}
    for k in STREAM_BATCHES:
        d = got(f"rtvd_stream_b{k}")
        streams[k] = d.get("frames_per_second")
        lat = (d.get("latency_ms"), d.get("latency_frames")) if d else None
        row(f"throughput mode: the same frame, --stream-batch {k}", "≥ 300 frames/s, added latency ≤ 2 frames",
            streams[k], fps(ms(f"frame_b{k}_compile", "frame")), fps(ms(f"frame_b{k}_graph", "frame")),
            unit="frames/s", latency=lat,
            met=streams[k] >= 300 and d.get("latency_frames", 99) <= 2 if streams[k] else None,
            note=f"{d.get('frames_per_call', k)} frames per U-Net call; PyTorch: {k} frames per call, latency "
            f"{k} × its ms per frame")
    for k in sorted(STREAM_BATCHES, reverse=True):
        t = fps(ms(f"frame_b{k}_compile", "frame"))
        row(f"throughput mode against PyTorch's {k}-frame batching, torch.compile", "rtvd ≥ 1.4×", streams[k], t,
            unit="frames/s", met=streams[k] / t >= 1.4 if streams[k] and t else None,
            note=f"bench_torch_sd.py frame --batch {k}: {k} frames uploaded, encoded, denoised, decoded and read back "
            "per call")

    # LCM: the steps of successive frames in one U-Net call, against one frame's steps after another
    seq, batched = got("rtvd_lcm"), got("rtvd_lcm_stream_b4")
    s_fps, b_fps = seq.get("frames_per_second"), batched.get("frames_per_second")
    ratio = b_fps / s_fps if s_fps and b_fps else None
    row("LCM, 4 steps, 512² txt2img, TAESD: --stream-batch 4 against one frame at a time", "≥ 2× frames/s", ratio,
        unit="×", met=ratio >= 2 if ratio else None,
        latency=batched and (batched.get("latency_ms"), batched.get("latency_frames")),
        detail=f"{b_fps:.0f} against {s_fps:.0f} frames/s" if ratio else "", note="guidance 1 (batch 1 per frame)")

    # feature cache on the moving source: the U-Net's time per frame, averaged over the full and the cached frames,
    # against without the cache. A stage replayed alone times the full frame's U-Net only, so the average comes
    # from the frames' mean times: the two frames differ in the U-Net alone (the same encode, sampler and decode
    # ops, whatever the pixels), so the U-Net's average with the cache is its full time less the frame's mean
    # saving. The error: bench frames' pass over the same frames with and without the cache.
    cached = raw.get("rtvd_feature_cache")
    fc = got("rtvd_feature_cache")
    u_plain = stage_ms(frame, "U-Net")
    plain_mean, cached_mean = (frame or {}).get("frame_ms_mean"), (fc or {}).get("frame_ms_mean")
    u_cached = u_plain - (plain_mean - cached_mean) if u_plain and plain_mean and cached_mean else None
    ratio = u_plain / u_cached if u_cached else None
    row(f"feature cache, refresh every {FEATURE_CACHE} frames", "U-Net time ≥ 1.6× lower on average, error reported",
        ratio, unit="×", met=ratio >= 1.6 if ratio else None,
        detail=(NOT_BUILT if cached == NOT_BUILT else
                f"U-Net {u_plain:.3f} → {u_cached:.3f} ms per frame on average; frame mean {plain_mean:.3f} → "
                f"{cached_mean:.3f} ms, a cached frame's (the median) {fc['frame_ms_median']:.3f} ms" if ratio else ""),
        note="moving source (bench frames --moving: a pan, 2 px right and 1 down per frame); " + cache_error(fc))

    # similarity filter on a static source (bench frames' one fixed image) and on the moving one (its pan)
    skips = {k: raw.get(f"rtvd_skip_similar{k}") for k in ("", "_moving")}
    static, moving = (next(iter(find_keys(got(f"rtvd_skip_similar{k}"), "skipped_fraction").values()), None)
                      for k in skips)
    both = static is not None and moving is not None
    row(f"similarity filter (--skip-similar {SKIP_SIMILAR}): static source / moving source",
        "≥ 90% skipped / none skipped", [100 * static, 100 * moving] if both else None, unit="% / % skipped",
        met=static >= 0.9 and moving == 0 if both else None,
        detail=NOT_BUILT if NOT_BUILT in skips.values() else "" if both else
        " / ".join(f"{what} {'–' if f is None else f'{100 * f:.1f}%'}" for what, f in (("static", static),
                                                                                    ("moving", moving)))
        + " skipped (–: its run failed)",
        note="static: bench frames' one fixed image; moving: bench frames --moving, a pan of 2 px right and 1 down "
        "per frame (every source pixel moves every frame)")

    # host time outside the stages of the latency-mode frame
    alone = stages_ms(frame)
    host = f_ms - alone if f_ms and alone else None
    row("host time outside the stages, latency-mode frame", "≤ 0.2 ms", host, met=host <= 0.2 if host else None,
        note=f"the frame's median minus the sum of its stages, each replayed alone as a CUDA graph (op-timed without "
        f"that): {f_ms:.3f} - {alone:.3f} ms" if host is not None else "")

    default = got("rtvd_default_frames")
    d_fps = default.get("frames_per_second")
    row("embedded default model, rtvd bench frames", "≥ 500 frames/s", d_fps, unit="frames/s",
        met=d_fps >= 500 if d_fps else None, latency=d_fps and (default["frame_ms_median"], 0),
        note="no PyTorch counterpart run")

    # the kernels: means, not ends
    kernels = raw.get("rtvd_kernels")
    for case in CONV_CASES:
        ours, cudnn = kernel_row(kernels, case, "default:"), kernel_row(kernels, case, "cuDNN")
        row(f"(means) own conv, {case}, batch 2", "≥ 500 TFLOP/s", ours and ours["tflops"], None,
            cudnn and cudnn["tflops"], unit="TFLOP/s", met=ours["tflops"] >= 500 if ours else None,
            note=f"{ours['impl'] if ours else ''}; library column: cuDNN through rtvd")
    sdpa = {(r["case"], r["backend"]): r for r in got("torch_sdpa").get("results", []) if "tflops" in r}
    for case, sdpa_case, target in (("sd21_64x64", "attn sd21 64x64 5x64 L4096", 450),
                                    ("sd15_64x64_d40", "attn sd15 64x64 8x40 L4096", None)):
        ours, cudnn = kernel_row(kernels, case, "default:"), kernel_row(kernels, case, "cuDNN")
        lib = [r["tflops"] for k, r in sdpa.items() if k[0] == sdpa_case]
        best_lib = max(lib + ([cudnn["tflops"]] if cudnn else []), default=None)
        if target:
            row("(means) flash attention, 4096², head dim 64", "≥ 450 TFLOP/s", ours and ours["tflops"], None,
                best_lib, unit="TFLOP/s", met=ours["tflops"] >= target if ours else None,
                note="library column: the best of cuDNN through rtvd and PyTorch's SDPA backends")
        else:
            row("(means) attention, SD 1.5 head dim 40, 4096²", "≥ cuDNN", ours and ours["tflops"], None, best_lib,
                unit="TFLOP/s", met=ours["tflops"] >= cudnn["tflops"] if ours and cudnn else None,
                note="library column: the best of cuDNN through rtvd and PyTorch's SDPA backends")
    return rows


FORMATS = {"ms": "{:.3f} ms", "s": "{:.2f} s", "frames/s": "{:.0f} frames/s", "TFLOP/s": "{:.0f} TFLOP/s", "×": "{:.2f}×",
           "% / % skipped": "{:.1f}% / {:.1f}% skipped"}


def markdown(rows):
    """The rows as the README's table: rtvd's number with its latency, PyTorch's beside it."""
    def fmt(v, unit):
        return "–" if v is None else FORMATS[unit].format(*v) if isinstance(v, list) else FORMATS[unit].format(v)

    def latency(r):
        if r["latency_ms"] is None:
            return "–"
        frames = r["latency_frames"]
        return f"{r['latency_ms']:.2f} ms" + (f" (+{frames} frame{'s' if frames > 1 else ''})" if frames else "")

    lines = ["| what | target | rtvd | latency | PyTorch, torch.compile | PyTorch, CUDA graph or library | "
             "rtvd's speed-up | met |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        u = r["unit"]
        rtvd = fmt(r["rtvd"], u) + (f" ({r['detail']})" if r["detail"] and r["rtvd"] is not None else "")
        if r["rtvd"] is None and r["detail"]:
            rtvd = r["detail"]
        speedup = "–" if r["speedup"] is None else f"{r['speedup']:.2f}×"
        met = "–" if r["met"] is None else "yes" if r["met"] else "no"
        lines.append(f"| {r['what']} | {r['target']} | {rtvd} | {latency(r)} | {fmt(r['torch_compile'], u)} | "
                     f"{fmt(r['torch_graph'], u)} | {speedup} | {met} |")
    return "\n".join(lines)


class PerfRun:
    """One run's document (machine, raw results, notes, timeline) under a deadline, rewritten to $OUT/NAME after
    every step with its rows (table_rows(raw)), so a run cut short keeps what it measured."""

    def __init__(self, name, work, deadline, table_rows, cuda, rtvd, env):
        self.begin, self.deadline, self.work, self.table_rows = time.time(), deadline, work, table_rows
        self.rtvd, self.env = rtvd, env
        out_dir = os.environ.get("OUT", "/tmp/rtvd-out")
        os.makedirs(out_dir, exist_ok=True)
        os.makedirs(os.path.join(work, "logs"), exist_ok=True)
        self.path = os.path.join(out_dir, name)
        self.doc = dict(machine() if cuda else {}, bench=name.removesuffix(".json"), work=work, raw={}, notes=[],
                        timeline=[])

    def left(self):
        return self.deadline - (time.time() - self.begin)

    def save(self):
        self.doc["rows"] = self.table_rows(self.doc["raw"])
        self.doc["table"] = markdown(self.doc["rows"])
        self.doc["seconds"] = time.time() - self.begin
        with open(self.path, "w") as f:
            json.dump(self.doc, f, indent=1)

    def note(self, text):
        self.doc["notes"].append(text)
        print("==", text, flush=True)

    def mark(self, what):
        self.doc["timeline"].append([what, round(time.time() - self.begin, 1)])
        print(f"-- {time.time() - self.begin:6.1f} s: {what}", flush=True)

    def log(self, key, text):
        with open(os.path.join(self.work, "logs", f"{key}.log"), "w") as f:
            f.write(text)

    def rtvd_json(self, key, command, timeout=120, env=None):
        """rtvd with --json into the raw results under key (NOT_BUILT where it refuses a flag it does not know)."""
        path = os.path.join(self.work, f"{key}.json")
        if os.path.exists(path):
            os.remove(path)
        code, out = sh([self.rtvd] + command + ["--json", path], min(timeout, max(1, self.left() - 10)),
                       env or self.env)
        self.log(key, out)
        last = out.strip().splitlines()[-1] if out.strip() else ""
        self.doc["raw"][key] = load(path) if code == 0 else NOT_BUILT if "unknown flag" in last else None
        if code:
            self.note(f"{key}: exit {code}: {last}")
        self.mark(key)
        self.save()

    def torch_runs(self, commands):
        """PyTorch processes ({key: command}, each with --ready/--go/--lock added), all built and compiled at once
        so that torch.compile's minutes overlap, then timed one at a time; each one's JSON into raw[key]. Those not
        ready when the deadline leaves a minute are stopped before the others are timed: still compiling (and
        autotuning on the GPU), they would weigh on every timing, their own included (a run whose deadline cut
        five torch.compile processes short timed them 1.4x slower than alone)."""
        sync = os.path.join(self.work, "sync")
        subprocess.run(["rm", "-rf", sync])
        os.makedirs(sync)
        go, lock = os.path.join(sync, "go"), os.path.join(sync, "lock")
        workers = {}
        for key, command in commands.items():
            command = command + ["--json", os.path.join(self.work, f"{key}.json"), "--ready", os.path.join(sync, key),
                                 "--go", go, "--lock", lock]
            workers[key] = start(command, dict(self.env, TORCHINDUCTOR_COMPILE_THREADS="4"),
                                 os.path.join(self.work, "logs", f"{key}.log"))
        self.mark("pytorch started")
        while self.left() > 60 and not all(os.path.exists(os.path.join(sync, k)) or p.poll() is not None
                                           for k, p in workers.items()):
            time.sleep(1)
        not_ready = [k for k, p in workers.items() if p.poll() is None and not os.path.exists(os.path.join(sync, k))]
        self.mark("pytorch ready" + (f" but {', '.join(not_ready)}, stopped" if not_ready else ""))
        for key in not_ready:
            stop(workers[key])
        open(go, "w").close()
        for key, p in workers.items():
            try:
                p.wait(timeout=max(1, self.left() - 5))
            except subprocess.TimeoutExpired:
                stop(p)
            self.doc["raw"][key] = load(os.path.join(self.work, f"{key}.json")) if p.returncode == 0 else None
            if p.returncode != 0:
                with open(os.path.join(self.work, "logs", f"{key}.log")) as f:
                    tail = f.read().strip()[-300:]
                self.note(f"pytorch {key}: " + ("not ready by the deadline" if key in not_ready
                                                 else f"exit {p.returncode}: {tail}"))
            self.save()
        self.mark("pytorch timed")

    def finish(self):
        self.save()
        d = self.doc
        print(f"\n{d.get('gpu')}, driver {d.get('driver')}, commit {d.get('commit')}, {d.get('date')}\n{d['table']}\n"
              f"wrote {self.path} ({d['seconds']:.0f} s)")


def command_line_run(name, description, work, runs, table_rows):
    """(PerfRun, its arguments) from a perf table script's command line: --work, --deadline, --runs, --device and
    --rtvd, the bundle unpacked unless --rtvd names a binary."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--work", default=work, help="weights and reports (GBs: not the repo)")
    parser.add_argument("--deadline", type=float, default=570, help="seconds the whole run may take")
    parser.add_argument("--runs", type=int, default=runs, help="timed calls per PyTorch measurement")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--rtvd", help="the rtvd binary to run instead of the bundle's (--device cpu: build-cpu/rtvd)")
    args = parser.parse_args()
    env = dict(os.environ) if args.rtvd else unpack_bundle()
    rtvd = os.path.abspath(args.rtvd) if args.rtvd else os.path.join(BUNDLE_DIR, "rtvd")
    return PerfRun(name, args.work, args.deadline, table_rows, args.device == "cuda", rtvd, env), args


def main():
    run, args = command_line_run("perf_table.json", __doc__.splitlines()[0], "/tmp/rtvd-perf", 100, table_rows)
    w, env, cuda = args.work, run.env, args.device == "cuda"
    size = "512" if cuda else "64"
    left, note, mark, rtvd_json, save = run.left, run.note, run.mark, run.rtvd_json, run.save

    # 1. the checkpoint, then what does not read it
    if not os.path.exists(os.path.join(w, "model", "model_index.json")):
        code, out = sh([sys.executable, "tools/reference/export_sd_references.py", "tests/data/tiny_sd", w, "--full",
                        VOCAB, "--weights-only"], max(1, left() - 120), env)
        run.log("export", out)
        mark("export")
        if code != 0:
            note(f"export_sd_references.py failed ({code}): see {w}/logs/export.log")
            save()
            sys.exit(1)
    model, taesd = os.path.join(w, "model"), os.path.join(w, "taesd")
    device = ["--device", args.device]
    if cuda:
        rtvd_json("rtvd_kernels", ["bench", "kernels", "--runs", "30"], timeout=240)
    rtvd_json("rtvd_default_frames", ["bench", "frames", "--frames", "2000" if cuda else "3"] + device)
    if cuda:
        sdpa = os.path.join(w, "torch_sdpa.json")
        code, out = sh([sys.executable, "tools/reference/bench_torch_attention.py", "--json", sdpa],
                       min(120, left() - 10), env)
        run.doc["raw"]["torch_sdpa"] = load(sdpa)
        if code:
            note(f"bench_torch_attention.py: exit {code}: {out.strip()[-300:]}")
        mark("torch_sdpa")

    # 2. rtvd on the checkpoint
    frames = ["bench", "frames", "--model", model, "--vae", taesd, "--size", size, "--frames",
              "300" if cuda else "4"] + device
    realtime = frames + ["--img2img", "--steps", "2", "--strength", "0.5", "--guidance", "0"]
    rtvd_json("rtvd_frame", realtime)
    for k in STREAM_BATCHES:
        rtvd_json(f"rtvd_stream_b{k}", realtime + ["--stream-batch", str(k)])
    lcm = frames + ["--steps", "4", "--sampler", "lcm", "--guidance", "1"]
    rtvd_json("rtvd_lcm", lcm)
    rtvd_json("rtvd_lcm_stream_b4", lcm + ["--stream-batch", "4"])
    rtvd_json("rtvd_feature_cache", realtime + ["--moving", "--feature-cache", FEATURE_CACHE])
    rtvd_json("rtvd_skip_similar", realtime + ["--skip-similar", SKIP_SIMILAR])
    rtvd_json("rtvd_skip_similar_moving", realtime + ["--moving", "--skip-similar", SKIP_SIMILAR])
    for b in (1, 2):
        rtvd_json(f"rtvd_unet_b{b}", ["bench", "unet", "--model", model, "--batch", str(b), "--runs",
                                      "300" if cuda else "1", "--profile"] + device)
    if not cuda:
        save()
        print(run.doc["table"])
        return

    # 3. PyTorch: all built and compiled at once, then timed one at a time
    run.torch_runs({key: [sys.executable, TORCH, what, model, "--taesd", taesd, "--mode", mode, "--batch", str(batch),
                          "--runs", str(args.runs)] for key, what, mode, batch in TORCH_RUNS})
    run.finish()


if __name__ == "__main__":
    main()
