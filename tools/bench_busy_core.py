#!/usr/bin/env python3
"""The CPU backend's speed with one core kept busy by another process, against --threads 1 (issue 14).

Times `rtvd render --device cpu` (the wall clock of the whole command, as a user meets it, and the CPU
time it used) for each variant, with no added load and with a busy loop (`yes`) pinned to the last CPU of
the set, in the same run: repeats are interleaved (both loads, every variant, then again) so that drift in
the machine's load spreads over all cells, and each cell reports its median.

    tools/bench_busy_core.py BUILD_DIR [--frames N] [--repeats R] [--cpus 0,1] [--json FILE]
                             [--variant LABEL=ARGS[;ENV=VALUE...]]...

Variants default to the default thread count and --threads 1; RTVD=PATH among a variant's variables
runs that rtvd binary instead of BUILD_DIR's (to compare builds). --cpus runs everything on those CPUs
(sched_setaffinity), as on a machine of that many cores; by default the CPUs this script may use.
Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def parse_variant(text):
    """LABEL=ARGS[;ENV=VALUE...] -> (label, [args], {env})."""
    label, _, rest = text.partition("=")
    parts = rest.split(";")
    env = dict(p.split("=", 1) for p in parts[1:] if p)
    return label, shlex.split(parts[0]), env


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit(root):
    def run(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True).stdout.strip()
    commit = run("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+dirty" if run("status", "--porcelain", "--untracked-files=no") else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="build directory holding rtvd")
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cpus", help="comma-separated CPU ids (default: this process's affinity)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--variant", action="append", help="LABEL=ARGS[;ENV=VALUE...]")
    ap.add_argument("--render-args", default="", help="extra flags for every render, e.g. '--size 96'")
    a = ap.parse_args()

    rtvd = os.path.join(a.build, "rtvd")
    if not os.access(rtvd, os.X_OK):
        sys.exit(f"bench_busy_core: no rtvd in {a.build}")
    cpus = sorted(int(c) for c in a.cpus.split(",")) if a.cpus else sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("bench_busy_core: needs at least 2 CPUs (one to keep busy)")
    variants = [parse_variant(v) for v in (a.variant or ["default=", "threads 1=--threads 1"])]
    loads = ["idle", "busy"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def on_cpus(cpu_set):
        return lambda: os.sched_setaffinity(0, cpu_set)

    def report(repeats_done, final):
        rows = []
        for label, args, env in variants:
            for load in loads:
                t = times[(label, load)]
                if not t:
                    continue
                rows.append({"variant": label, "args": args, "env": env, "load": load,
                             "seconds": [round(x, 3) for x in t], "median_s": round(statistics.median(t), 3),
                             "cpu_seconds": [round(x, 3) for x in cpu_times[(label, load)]],
                             "median_ms_per_frame": round(1000 * statistics.median(t) / a.frames, 1)})
        if final:
            print(f"\n{'variant':12} {'load':5} {'median s':>9} {'ms/frame':>9}   (render of {a.frames} frames, "
                  f"{a.repeats} repeats, CPUs {','.join(map(str, cpus))})")
            for row in rows:
                print(f"{row['variant']:12} {row['load']:5} {row['median_s']:9.2f} {row['median_ms_per_frame']:9.1f}")
        if a.json:
            doc = {
                "bench": "cpu_busy_core",
                "what": "wall time of `rtvd render --device cpu` (whole command: load, setup, frames), median "
                        "of repeats; busy = `yes` pinned to the last CPU of the set",
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "commit": commit,
                "machine": {"cpu": cpu_model(), "cpus_used": cpus, "cpus_online": os.cpu_count(),
                            "kernel": platform.release()},
                "loadavg_start": [round(x, 2) for x in loadavg_start],
                "loadavg_end": [round(x, 2) for x in os.getloadavg()],
                "frames": a.frames,
                "repeats": repeats_done,
                "render_args": a.render_args,
                "results": rows,
            }
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")

    times = {(label, load): [] for label, _, _ in variants for load in loads}
    cpu_times = {key: [] for key in times}  # rtvd's user + system time: how many threads it kept busy
    loadavg_start = os.getloadavg()
    commit = git_commit(root)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for load in loads:
                hog = None
                if load == "busy":
                    hog = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL, preexec_fn=on_cpus({cpus[-1]}))
                    time.sleep(0.5)
                try:
                    for label, args, env in variants:
                        out = tempfile.mkdtemp(dir=tmp) + "/"  # a fresh directory: no older sequence in it
                        env = dict(env)
                        cmd = [env.pop("RTVD", rtvd), "render", "--device", "cpu", "--quiet", "--frames", str(a.frames),
                               "-o", out, *shlex.split(a.render_args), *args]
                        start = time.monotonic()
                        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env={**os.environ, **env},
                                                 preexec_fn=on_cpus(set(cpus)))
                        _, status, usage = os.wait4(child.pid, 0)
                        seconds = time.monotonic() - start
                        child.returncode = os.waitstatus_to_exitcode(status)
                        if child.returncode != 0:
                            sys.exit(f"bench_busy_core: {' '.join(cmd)} exited with {child.returncode}")
                        times[(label, load)].append(seconds)
                        cpu_times[(label, load)].append(usage.ru_utime + usage.ru_stime)
                        print(f"repeat {r + 1}/{a.repeats} {load:4} {label:12} {seconds:7.2f} s "
                              f"({cpu_times[(label, load)][-1]:.2f} s CPU)", flush=True)
                finally:
                    if hog:
                        hog.kill()
                        hog.wait()
            report(r + 1, False)  # so that a run cut short still leaves its results

    report(a.repeats, True)


if __name__ == "__main__":
    main()
