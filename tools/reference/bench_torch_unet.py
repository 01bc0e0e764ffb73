"""PyTorch's side of the U-Net comparison (tools/compare_unet.py): one way of running one model, per process.

    python3 tools/reference/bench_torch_unet.py MODEL_DIR --mode eager|graph|compile --batch N [--runs N] [--json FILE]

MODEL_DIR holds config.json and weights.safetensors (export_sd_parity.py writes them). The model is our
reference (unet.py, diffusers' layout) in fp16 on the GPU with fused attention
(F.scaled_dot_product_attention) and cuDNN's convolution autotuning on, built as diffusers loads a
checkpoint: no default init, the weights read straight to the GPU. Modes: eager; eager captured in one CUDA graph (static inputs, replayed);
torch.compile(mode="reduce-overhead") (Inductor with CUDA graphs). Timing: CUDA events around each of
--runs calls queued back to back, after warm-up; the median. Time to first output: from this process's
start (exec included, as for rtvd) until the first forward's output is on the GPU. Peak memory:
torch.cuda.max_memory_allocated, and the growth of the device's used memory after the CUDA context.
Prints one JSON object (also to --json).
"""
import os
import sys
import time


def seconds_since_process_start():
    """The kernel's start time of this process (/proc/self/stat field 22) against CLOCK_BOOTTIME."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # from field 3 on
    return time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")


START_S = seconds_since_process_start()  # before importing torch, which is part of starting up

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from unet import empty_model  # noqa: E402


def load_weights(path):
    try:
        from safetensors.torch import load_file
        return load_file(path, device="cuda")
    except ImportError:
        import st_io
        return {k: torch.from_numpy(v).cuda() for k, v in st_io.read(path)[0].items()}


def timed_ms(fn, runs):
    """GPU ms of each of `runs` calls of fn, from events around each, queued back to back."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def step_clock(start_s):
    """(steps, step): step(name) records under name the seconds since the previous step (or since this call;
    "start" is start_s)."""
    steps = {"start": start_s}
    clock = [time.perf_counter()]

    def step(name):
        now = time.perf_counter()
        steps[name] = now - clock[0]
        clock[0] = now
    return steps, step


def captured(fn):
    """fn captured in one CUDA graph after warm-up: (replay, the output fn gave in the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch.cuda.graphs asks
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph.replay, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--mode", choices=["eager", "graph", "compile"], required=True)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-cudnn-benchmark", action="store_true",
                        help="keep cuDNN's heuristic convolution algorithms instead of timing them at the first call")
    parser.add_argument("--channels-last", action="store_true", help="NHWC activations and weights (not diffusers' default)")
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark

    steps, step = step_clock(START_S)

    torch.cuda.init()
    device_used_before = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
    step("cuda")
    with open(os.path.join(args.model_dir, "config.json")) as f:
        cfg = json.load(f)
    model = empty_model(cfg, "meta").eval()
    model.load_state_dict(load_weights(os.path.join(args.model_dir, "weights.safetensors")), assign=True)
    model.use_sdpa()
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    step("weights")

    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    size = cfg["sample_size"]
    x = torch.randn(args.batch, cfg["in_channels"], size, size, generator=gen, device="cuda",
                    dtype=torch.half).to(memory_format=memory_format)
    t = torch.full((args.batch,), 0.5, device="cuda")
    context = torch.randn(args.batch, cfg["context_length"], cfg["cross_attention_dim"], generator=gen,
                          device="cuda", dtype=torch.half)
    with torch.inference_mode():
        if args.mode == "compile":
            forward = torch.compile(model, mode="reduce-overhead")

            def run():
                torch.compiler.cudagraph_mark_step_begin()  # each call a new step: its CUDA graph replays
                return forward(x, t, None, context)
        else:
            def run():
                return model(x, t, None, context)
        out = run()
        torch.cuda.synchronize()
        step("first forward")
        first_output_s = seconds_since_process_start()
        finite = bool(torch.isfinite(out).all())
        del out  # a compiled graph's later replays overwrite it
        if args.mode == "graph":
            run = captured(run)[0]
        for _ in range(args.warmup):
            run()
        ms = timed_ms(run, args.runs)
    device_used_after = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]

    result = {
        "impl": f"pytorch {args.mode}", "mode": args.mode, "batch": args.batch, "runs": args.runs,
        "ms_median": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms),
        "time_to_first_output_s": first_output_s, "steps_s": steps,
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
        "gpu_memory_growth_bytes": device_used_after - device_used_before,
        "output_finite": finite, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark, "channels_last": args.channels_last,
    }
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
