"""Library baselines for rtvd's flash attention: PyTorch's scaled_dot_product_attention through each of its
backends (cuDNN's fused attention, FlashAttention-2, memory-efficient) at the shapes `rtvd bench kernels`
times, on the GPU machine:

    ./rtvd bench kernels --json kernels.json
    python3 tools/reference/bench_torch_attention.py --rtvd kernels.json --json attention_sdpa.json

rtvd cannot call cuDNN's SDPA itself (that needs cudnn-frontend's graph, which neither machine has), so
this is how its attention is compared with cuDNN's. Inputs are laid out as rtvd's are: tokens of
(heads x head_dim) per row, q/k/v read in place from a fused projection (self-attention) or q apart from
a fused k/v (cross), viewed as (batch, heads, tokens, head_dim) with strides, fp16. Timing: CUDA events
around each of --runs calls after warm-up, median; inputs rotated past L2 as rtvd's benchmark does.
Prints a table (ms, TFLOP/s, rtvd's time over the backend's) and writes the JSON.
"""
import argparse
import json
import statistics
import subprocess

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# (name as in rtvd bench kernels, batch, heads, head_dim, q_len, kv_len)
CASES = [
    ("attn sd21 64x64 5x64 L4096", 2, 5, 64, 4096, 4096),
    ("attn sd21 32x32 10x64 L1024", 2, 10, 64, 1024, 1024),
    ("attn sd21 cross 4096x77", 2, 5, 64, 4096, 77),
    ("attn sd15 64x64 8x40 L4096", 2, 8, 40, 4096, 4096),
    ("attn sd15 32x32 8x80 L1024", 2, 8, 80, 1024, 1024),
    ("attn sd15 16x16 8x160 L256", 2, 8, 160, 256, 256),
]
BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash2": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}
ROTATE_BYTES = 256 << 20  # past the 50 MB L2


def inputs(batch, heads, head_dim, q_len, kv_len):
    """q, k, v as (batch, heads, tokens, head_dim) strided views of rtvd's row layouts, and their bytes."""
    if q_len == kv_len:
        qkv = torch.randn(batch, q_len, 3, heads, head_dim, device="cuda", dtype=torch.float16)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        return q, k, v, qkv.numel() * 2
    q = torch.randn(batch, q_len, heads, head_dim, device="cuda", dtype=torch.float16).transpose(1, 2)
    kv = torch.randn(batch, kv_len, 2, heads, head_dim, device="cuda", dtype=torch.float16)
    return q, kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2), (q.numel() + kv.numel()) * 2


def median_ms(fn, copies, runs, warmup=10):
    for i in range(warmup):
        fn(i % copies)
    ms = []
    for i in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i % copies)
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--rtvd", help="JSON of `rtvd bench kernels` from the same machine, for the ratio")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    rtvd = {}
    if args.rtvd:
        for r in json.load(open(args.rtvd))["results"]:
            if r["impl"] == "flash":
                rtvd[r["case"]] = r["ms"]
    gpu, driver = [s.strip() for s in subprocess.check_output(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], text=True).splitlines()[0].split(",")]
    doc = {"gpu": gpu, "driver": driver, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "runs": args.runs, "results": []}
    print(f"{gpu}, driver {driver}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"{'case':30s} {'backend':10s} {'ms':>8s} {'TFLOP/s':>8s} {'rtvd ms':>8s} {'rtvd/lib':>8s}")
    for name, batch, heads, head_dim, q_len, kv_len in CASES:
        first = inputs(batch, heads, head_dim, q_len, kv_len)
        copies = max(1, min(16, ROTATE_BYTES // first[3]))
        sets = [first] + [inputs(batch, heads, head_dim, q_len, kv_len) for _ in range(copies - 1)]
        flops = 4.0 * batch * heads * q_len * kv_len * head_dim
        for backend, which in BACKENDS.items():
            row = {"case": name, "backend": backend}
            try:
                with sdpa_kernel([which]):
                    ms = median_ms(lambda i: F.scaled_dot_product_attention(*sets[i][:3]), copies, args.runs)
                row.update(ms=ms, tflops=flops / ms / 1e9)
                ours = rtvd.get(name)
                if ours:
                    row["rtvd_ms"], row["rtvd_over_library"] = ours, ours / ms
                print(f"{name:30s} {backend:10s} {ms:8.4f} {row['tflops']:8.1f} "
                      f"{ours or float('nan'):8.4f} {(ours / ms) if ours else float('nan'):8.2f}")
            except RuntimeError as e:  # this backend does not take the shape (e.g. head dim 40 on cuDNN)
                row["error"] = str(e).splitlines()[0][:200]
                print(f"{name:30s} {backend:10s} unsupported: {row['error'][:70]}")
            doc["results"].append(row)
    if args.json:
        json.dump(doc, open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
