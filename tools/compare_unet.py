#!/usr/bin/env python3
"""On the GPU machine, one command: the SD 2.1 U-Net in PyTorch and in rtvd, same weights, same run.

    python3 tools/compare_unet.py [--batches 1,2] [--modes eager,graph,compile] [--compile-batches 2]
                                  [--kernels auto,custom,cudnn] [--parity sd21,sd15] [--deadline 570]

From the repository root, with the bundle of a CUDA build (tools/device-bundle.sh; unpacked to
/tmp/rtvd as tools/device-check.sh does). Steps, each in a fresh process so that its time to first
output counts from its own start:
  1. tools/reference/export_sd_parity.py: random fp16 weights (~1.7 GB per model, in --work, never
     committed), inputs and PyTorch's fp32 output, for the --parity models (sd21 is always made: every
     benchmark below loads its weights);
  2. tests/unet_sd_cuda_test on those files: rtvd vs PyTorch, relative L2 per kernel family;
  3. `rtvd bench unet --config sd21 --weights ...` per batch and kernel family;
  4. tools/reference/bench_torch_unet.py per batch and mode (eager, eager in one CUDA graph,
     torch.compile "reduce-overhead"; compiling takes ~200 s per batch, so only --compile-batches, and
     only while --deadline leaves time for it).
Prints a table (ms, TFLOP/s, how many times rtvd's time, peak memory, time to first output) and writes
$OUT/compare_unet.json (GPU, driver, commit, date, every measurement) for docs/bench/; the JSON is
rewritten after every step, so a run cut short keeps what it measured.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE_DIR = "/tmp/rtvd"
COMPILE_SECONDS = 300  # what one torch.compile run needs, compile included, to be worth starting


def sh(command, timeout, env=None):
    """(exit code, stdout + stderr) of a command; a timeout is exit code 124."""
    try:
        r = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        return 124, out.decode(errors="replace") if isinstance(out, bytes) else out


def unpack_bundle():
    """Unpacks .device/bundle.tar.xz to BUNDLE_DIR unless that bundle is there already (a machine kept warm
    between calls keeps /tmp: a newer bundle replaces the old one)."""
    bundle = os.path.join(ROOT, ".device/bundle.tar.xz")
    if not os.path.exists(bundle):
        sys.exit("no .device/bundle.tar.xz: run tools/device-bundle.sh first and send .device along")
    stamp = f"{os.path.getsize(bundle)} {os.path.getmtime(bundle)}"
    stamp_file = os.path.join(BUNDLE_DIR, ".bundle-stamp")
    if not os.path.exists(stamp_file) or open(stamp_file).read() != stamp:
        os.makedirs(BUNDLE_DIR, exist_ok=True)
        code, out = sh(["tar", "-xJf", bundle, "-C", BUNDLE_DIR], 300)
        if code:
            sys.exit(f"cannot unpack {bundle}: {out.strip()}")
        with open(stamp_file, "w") as f:
            f.write(stamp)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(BUNDLE_DIR, "lib") + ":" + env.get("LD_LIBRARY_PATH", "")
    return env


def machine():
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()[0]
    gpu, driver = [s.strip() for s in out.split(",")]
    commit_file = os.path.join(BUNDLE_DIR, ".commit")
    commit = open(commit_file).read().strip() if os.path.exists(commit_file) else "unknown"
    return {"gpu": gpu, "driver": driver, "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def parity_properties(report_path):
    """{test name: {property: value, "failed": bool}} from GoogleTest's JSON report."""
    with open(report_path) as f:
        report = json.load(f)
    tests = {}
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            props = {k: v for k, v in case.items() if k.startswith(("rel_l2", "torch_fp16"))}
            props["failed"] = bool(case.get("failures"))
            props["skipped"] = case.get("result") == "SKIPPED"
            tests[case["name"]] = props
    return tests


def table(rows, flops):
    lines = [f"{'implementation':<28} {'batch':>5} {'ms':>8} {'TFLOP/s':>8} {'x rtvd':>7} {'peak MiB':>9} "
             f"{'device MiB':>10} {'1st out s':>9}"]
    for r in rows:
        if "ms_median" not in r:
            lines.append(f"{r['impl']:<28} {r['batch']:>5}   {r.get('note', 'failed')}")
            continue
        base = next((b for b in rows if b["impl"] == "rtvd auto" and b["batch"] == r["batch"] and "ms_median" in b), None)
        ratio = f"{r['ms_median'] / base['ms_median']:.2f}" if base else "-"
        tflops = flops.get(r["batch"], 0) / r["ms_median"] / 1e9
        lines.append(f"{r['impl']:<28} {r['batch']:>5} {r['ms_median']:>8.3f} {tflops:>8.1f} {ratio:>7} "
                     f"{r['peak_bytes'] / 2**20:>9.0f} {r['gpu_memory_growth_bytes'] / 2**20:>10.0f} "
                     f"{r['time_to_first_output_s']:>9.2f}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,2")
    parser.add_argument("--modes", default="eager,graph,compile")
    parser.add_argument("--compile-batches", default="2", help="batches to torch.compile (~200 s each)")
    parser.add_argument("--kernels", default="auto,custom,cudnn")
    parser.add_argument("--parity", default="sd21,sd15", help="models to check against PyTorch ('' for none)")
    parser.add_argument("--torch-flags", default="", help="more flags for bench_torch_unet.py, e.g. --channels-last")
    parser.add_argument("--runs", type=int, default=100, help="timed forwards per measurement")
    parser.add_argument("--work", default="/tmp/rtvd-sd", help="weights and reports (GBs: not the repo)")
    parser.add_argument("--deadline", type=float, default=570, help="seconds the whole run may take")
    args = parser.parse_args()
    begin = time.time()
    left = lambda: args.deadline - (time.time() - begin)  # noqa: E731
    out_dir = os.environ.get("OUT", "/tmp/rtvd-out")
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    env = unpack_bundle()
    batches = [int(b) for b in args.batches.split(",")]
    parity_models = [m for m in args.parity.split(",") if m]
    doc = dict(machine(), bench="compare_unet", model="sd21", runs=args.runs, rows=[], parity={}, notes=[])
    flops = {}

    def save():
        with open(os.path.join(out_dir, "compare_unet.json"), "w") as f:
            json.dump(doc, f, indent=2)

    def note(text):
        doc["notes"].append(text)
        print("==", text, flush=True)

    models = ["sd21"] + [m for m in parity_models if m != "sd21"]
    fresh = [m for m in models if not os.path.exists(os.path.join(args.work, m, "io.safetensors"))]
    if fresh:
        code, out = sh([sys.executable, "tools/reference/export_sd_parity.py", args.work, "--models", ",".join(fresh)],
                       left() - 10)
        print(out, end="", flush=True)
        if code:
            note(f"export_sd_parity.py failed (exit {code})")
            save()
            sys.exit(1)

    if parity_models:
        report = os.path.join(args.work, "parity.json")
        code, out = sh([os.path.join(BUNDLE_DIR, "tests/unet_sd_cuda_test"), "--gtest_brief=1",
                        "--gtest_filter=*FullSize*", f"--gtest_output=json:{report}"], min(300, left() - 10),
                       dict(env, RTVD_SD_PARITY_DIR=args.work))
        doc["parity"] = parity_properties(report) if os.path.exists(report) else {}
        note(f"unet_sd_cuda_test exit {code}: " + ", ".join(
            " ".join([name, "FAILED" if p["failed"] else "skipped" if p["skipped"] else "ok"] +
                     [f"{k}={float(v):.2e}" for k, v in p.items() if k.startswith(("rel", "torch"))])
            for name, p in doc["parity"].items()))
        if code:
            print(out[-3000:], flush=True)
        save()

    weights = os.path.join(args.work, "sd21", "weights.safetensors")
    for batch in batches:
        for kernels in args.kernels.split(","):
            row = {"impl": f"rtvd {kernels}", "batch": batch}
            report = os.path.join(args.work, f"rtvd_b{batch}_{kernels}.json")
            code, out = sh([os.path.join(BUNDLE_DIR, "rtvd"), "bench", "unet", "--config", "sd21", "--batch", str(batch),
                            "--device", "cuda", "--kernels", kernels, "--weights", weights, "--runs", str(2 * args.runs),
                            "--json", report],
                           min(120, left() - 10), env)
            print(out, end="", flush=True)
            if code == 0:
                row.update(json.load(open(report)))
                row["impl"] = f"rtvd {kernels}"
                row["peak_bytes"] = row["weight_bytes"] + row["activation_bytes"]
                flops[batch] = row["forward_flops"] + row["setup_flops"]
            else:
                row["note"] = f"failed (exit {code}): {out.strip().splitlines()[-1] if out.strip() else ''}"
            doc["rows"].append(row)
            save()

    for batch in batches:
        for mode in args.modes.split(","):
            row = {"impl": f"pytorch {mode}", "batch": batch}
            if mode == "compile" and str(batch) not in args.compile_batches.split(","):
                continue
            if mode == "compile" and left() < COMPILE_SECONDS:
                row["note"] = f"skipped: {left():.0f} s left of --deadline, compiling needs ~{COMPILE_SECONDS}"
                doc["rows"].append(row)
                continue
            report = os.path.join(args.work, f"torch_b{batch}_{mode}.json")
            code, out = sh([sys.executable, "tools/reference/bench_torch_unet.py", os.path.join(args.work, "sd21"),
                            "--mode", mode, "--batch", str(batch), "--runs", str(args.runs), "--json", report]
                           + args.torch_flags.split(),
                           left() - 10, env)
            if code == 0:
                row.update(json.load(open(report)))
                row["peak_bytes"] = row["max_memory_allocated_bytes"]
                print(f"== pytorch {mode} batch {batch}: {row['ms_median']:.3f} ms", flush=True)
            else:
                row["note"] = f"failed (exit {code}): {out.strip().splitlines()[-1] if out.strip() else ''}"
                print(out[-2000:], flush=True)
            doc["rows"].append(row)
            save()

    doc["flops_per_forward"] = {str(b): f for b, f in flops.items()}
    doc["table"] = table(doc["rows"], flops)
    doc["seconds"] = time.time() - begin
    save()
    ceilings = next((r["ceilings"] for r in doc["rows"] if "ceilings" in r), None)
    print(f"\n{doc['gpu']}, driver {doc['driver']}, commit {doc['commit']}, {doc['date']}; SD 2.1 U-Net, 64x64 latents, "
          f"fp16; {', '.join(f'batch {b}: {f / 1e12:.3f} TFLOP' for b, f in flops.items())} per forward")
    if ceilings:
        floor = ", ".join(f"batch {b} {f / ceilings['gemm_tflops'] / 1e9:.2f} ms" for b, f in flops.items())
        print(f"GEMM peak measured now {ceilings['gemm_tflops']:.0f} TFLOP/s: floor {floor}")
    print(f"peak MiB: PyTorch max_memory_allocated, rtvd weights + activations; device MiB: growth of used GPU memory "
          f"after the CUDA context\n{doc['table']}\nwrote {os.path.join(out_dir, 'compare_unet.json')} "
          f"({doc['seconds']:.0f} s)")
    failed = any(p["failed"] for p in doc["parity"].values()) or \
        any("ms_median" not in r and not r["note"].startswith("skipped") for r in doc["rows"])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
