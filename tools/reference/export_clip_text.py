"""Random-weight CLIPTextModels written by transformers, with transformers' hidden states for rtvd to match.

    python3 tools/reference/export_clip_text.py OUT_DIR --config small_quick_gelu|small_gelu|sd15|sd21
                                                [--batch 2] [--seed 0] [--bench BENCH.json]

OUT_DIR/text_encoder/{config.json, model.safetensors} is what save_pretrained writes (fp16 weights), the
layout of a diffusers folder. OUT_DIR/expected.safetensors holds input_ids (B, 77) int32 and, from the same
fp16 weights run in fp32 (eager attention, TF32 off): last_hidden_state and clip_skip_1, clip_skip_2 (the
hidden state 1 and 2 layers earlier through the final LayerNorm, as diffusers' encode_prompt does), each
(B, 77, D) fp32. The small configs are committed under tests/data; the production ones (sd15: OpenAI CLIP
ViT-L/14, sd21: OpenCLIP ViT-H/14 as diffusers stores it) are made on the GPU machine for the GPU test.
--bench times transformers' own fp16 forward (SDPA, eager mode) at batch 1 and 2 on the GPU.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel

CONFIGS = {
    "small_quick_gelu": dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                             num_attention_heads=2, hidden_act="quick_gelu", projection_dim=128),
    "small_gelu": dict(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=3,
                       num_attention_heads=2, hidden_act="gelu", projection_dim=128),
    "sd15": dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                 num_attention_heads=12, hidden_act="quick_gelu", projection_dim=768),
    "sd21": dict(vocab_size=49408, hidden_size=1024, intermediate_size=4096, num_hidden_layers=23,
                 num_attention_heads=16, hidden_act="gelu", projection_dim=512),
}


def randomize(model, seed):
    """transformers' init leaves LayerNorms at 1/0 and biases at 0: perturb them so that every parameter counts."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.02 if "embedding" in name else p.shape[-1] ** -0.5))


def input_ids(vocab, batch, seed):
    """Rows as the tokenizer makes them: BOS, tokens, EOS, then EOS padding (SD 1.x) or id 0 (SD 2.x)."""
    g = np.random.default_rng(seed)
    rows = []
    for b in range(batch):
        n = [5, 75, 20, 40][b % 4]
        bos, eos = (49406, 49407) if vocab > 49407 else (vocab - 2, vocab - 1)
        body = list(g.integers(0, vocab - 2, n))
        row = [bos] + body + [eos]
        row += [eos if b % 2 == 0 else 0] * (77 - len(row))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.int64)


def bench(model, ids, runs=50):
    times = []
    with torch.inference_mode():
        for i in range(runs + 10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(ids)
            end.record()
            torch.cuda.synchronize()
            if i >= 10:
                times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bench")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg = CLIPTextConfig(max_position_embeddings=77, layer_norm_eps=1e-5, **CONFIGS[a.config])
    model = CLIPTextModel(cfg)
    randomize(model, a.seed)
    model = model.half()  # the weights as stored; the reference runs them in fp32
    model.save_pretrained(os.path.join(a.out, "text_encoder"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ref = CLIPTextModel.from_pretrained(os.path.join(a.out, "text_encoder"), torch_dtype=torch.float32,
                                        attn_implementation="eager").to(device).eval()
    ids = input_ids(cfg.vocab_size, a.batch, a.seed + 1)
    with torch.inference_mode():
        out = ref(ids.to(device), output_hidden_states=True)
        hidden = out.hidden_states
        tensors = {"input_ids": ids.to(torch.int32), "last_hidden_state": out.last_hidden_state.float().cpu()}
        for skip in (1, 2):
            # transformers 5 flattened CLIPTextModel (no .text_model); diffusers still reaches through it
            final_norm = getattr(ref, "text_model", ref).final_layer_norm
            tensors[f"clip_skip_{skip}"] = final_norm(hidden[-(skip + 1)]).float().cpu()
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(a.out, "expected.safetensors"))
    print(f"{a.config}: {sum(p.numel() for p in ref.parameters()) / 1e6:.1f} M parameters, wrote {a.out}")
    if a.bench:
        fast = CLIPTextModel.from_pretrained(os.path.join(a.out, "text_encoder"), torch_dtype=torch.float16).to("cuda").eval()
        rows = {}
        for b in (1, 2):
            rows[f"batch{b}"] = bench(fast, input_ids(cfg.vocab_size, b, 7).to("cuda"))
        result = {"config": a.config, "transformers_fp16_sdpa_ms": rows, "torch": torch.__version__}
        with open(a.bench, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result))


if __name__ == "__main__":
    main()
