"""The tiny SDXL pipeline (tests/data/tiny_sdxl_pipeline/model) as one original-layout (SGM) single file, checked
by diffusers' own from_single_file, and two tiny SDXL LoRAs with diffusers' outputs for them, for rtvd's CPU tests
(issue 28).

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sdxl_single_file.py \
        tests/data/tiny_sdxl_pipeline tests/data/tiny_sdxl_single_file

PIPELINE_DIR is export_tiny_sdxl_pipeline.py's output (its model/ folder and pipelines.json/.safetensors, whose
cases' latents and noise are reused). OUT_DIR gets:
  tiny_sdxl.manifest.json, tiny_sdxl_extras.safetensors
                         the single file tiny_sdxl.safetensors (3.4 MB, written to a temporary folder and checked
                         there) in commit size, as pack_sd_refs.py packs SD's: its metadata and every tensor's name,
                         dtype, shape and content key, the bytes found among the folder's weights files, those in
                         none of them (the fused in_proj, text_projection, position_ids, logit_scale) in the
                         extras; the test rebuilds the file byte for byte (tests/sdxl_pipeline_test.cpp).
                         tiny_sdxl.safetensors holds the folder's U-Net, VAE and both text encoders in fp16 under
                         the names published SDXL
                         checkpoints use: model.diffusion_model.* (input_blocks/middle_block/output_blocks,
                         label_emb.0.0/0.2 for the added embedding), first_stage_model.* (the VAE, the mid-block
                         attention's q/k/v/proj_out as 1x1 convs), conditioner.embedders.0.transformer.text_model.*
                         (CLIP ViT-L as transformers names it), conditioner.embedders.1.model.* (OpenCLIP: fused
                         attn.in_proj_weight/bias, ln_1/ln_2, mlp.c_fc/c_proj, token_embedding,
                         positional_embedding, ln_final, text_projection stored (width, projection), logit_scale).
                         diffusers ships no SDXL converter in this tree (scripts/ has SD's only), so the mapping is
                         written here; StableDiffusionXLPipeline.from_single_file(config=<model folder>) loads the
                         file back and every tensor must equal the folder's, which checks it name by name.
  lora_peft.safetensors  one random LoRA (rank 4) of the U-Net's attention and feed-forward layers and of both text
                         encoders' attention and MLP: unet.* / text_encoder.* / text_encoder_2.* with lora_A/lora_B.
  lora_kohya.safetensors the same LoRA as kohya writes SDXL's: lora_unet_<original-layout module> (input_blocks_4_1_
                         ...), lora_te1_text_model_*, lora_te2_text_model_*, lora_down/lora_up and alpha 8 (scale 2,
                         so lora_up is halved and both files are one update).
  lora_cases.safetensors / lora_cases.json
                         per LoRA file, diffusers' output for the pipeline's case CASE with that file loaded and fused
                         at LORA_SCALE (the case's own latents from pipelines.safetensors): final_latents and image.

On the GPU machine, full size (never committed: 6.9 GB):

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sdxl_single_file.py --full MODEL_DIR FILE

writes export_tiny_sdxl_pipeline.py --full's model folder as one original-layout FILE, checked the same way, for
RTVD_SDXL_PARITY_MODEL=FILE tests/sd_pipeline_cuda_test (the folder's cases from the single file).
"""
import argparse
import json
import os
import sys
import tempfile
import traceback

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_sd_references import RecordNoise  # noqa: E402  (what a module draws through its randn_tensor)
from export_tiny_sd import print_file_sizes, randomize  # noqa: E402  (every parameter random)
from pack_sd_refs import pack_files  # noqa: E402  (a single file as a manifest of the folder's tensors)

CASE = "txt2img_euler_a_2steps"
LORA_SCALE = 0.7
UNET_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "proj_in", "proj_out", "ff.net.0.proj", "ff.net.2"]
TEXT_TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]
CLIP = "conditioner.embedders.0.transformer."
OPEN_CLIP = "conditioner.embedders.1.model."
RESNET = {"norm1": "in_layers.0", "conv1": "in_layers.2", "time_emb_proj": "emb_layers.1", "norm2": "out_layers.0",
          "conv2": "out_layers.3", "conv_shortcut": "skip_connection"}
UNET_OUTER = {"time_embedding.linear_1": "time_embed.0", "time_embedding.linear_2": "time_embed.2",
              "add_embedding.linear_1": "label_emb.0.0", "add_embedding.linear_2": "label_emb.0.2",
              "conv_in": "input_blocks.0.0", "conv_norm_out": "out.0", "conv_out": "out.2"}


def unet_module_to_original(name, config):
    """A diffusers U-Net module (without .weight/.bias) -> its name in the original layout (SGM's UNetModel)."""
    per_level = config["layers_per_block"] + 1
    attention_up = [t.startswith("CrossAttn") for t in config["up_block_types"]]
    if name in UNET_OUTER:
        return UNET_OUTER[name]
    p = name.split(".")
    if p[0] == "mid_block":
        if p[1] == "resnets":
            return f"middle_block.{2 * int(p[2])}.{RESNET[p[3]]}"
        return "middle_block.1." + ".".join(p[3:])
    level, kind, j, rest = int(p[1]), p[2], int(p[3]) if p[3].isdigit() else 0, ".".join(p[4:])
    if p[0] == "down_blocks":
        if kind == "resnets":
            return f"input_blocks.{1 + level * per_level + j}.0.{RESNET[rest]}"
        if kind == "attentions":
            return f"input_blocks.{1 + level * per_level + j}.1.{rest}"
        return f"input_blocks.{(level + 1) * per_level}.0.op"  # downsamplers.0.conv
    if kind == "resnets":
        return f"output_blocks.{level * per_level + j}.0.{RESNET[rest]}"
    if kind == "attentions":
        return f"output_blocks.{level * per_level + j}.1.{rest}"
    return f"output_blocks.{level * per_level + per_level - 1}.{2 if attention_up[level] else 1}.conv"


def split_module(key):
    module, _, wb = key.rpartition(".")
    return module, wb


def unet_to_original(sd, config):
    out = {}
    for k, v in sd.items():
        module, wb = split_module(k)
        out["model.diffusion_model." + unet_module_to_original(module, config) + "." + wb] = v
    return out


def vae_to_original(sd, config):
    levels = len(config["block_out_channels"])
    names = {"conv_shortcut": "nin_shortcut", "conv_norm_out": "norm_out"}
    attn = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "proj_out"}
    out = {}
    for k, v in sd.items():
        module, wb = split_module(k)
        p = module.split(".")
        if p[0] in ("quant_conv", "post_quant_conv"):
            name = module
        elif p[1] in ("conv_in", "conv_out", "conv_norm_out"):
            name = f"{p[0]}.{names.get(p[1], p[1])}"
        elif p[1] == "mid_block" and p[2] == "resnets":
            name = f"{p[0]}.mid.block_{int(p[3]) + 1}.{names.get(p[4], p[4])}"
        elif p[1] == "mid_block":  # attentions.0.<module>: 1x1 convs in the original
            name = f"{p[0]}.mid.attn_1.{attn['.'.join(p[4:])]}"
            if v.dim() == 2:
                v = v[:, :, None, None]
        elif p[1] == "down_blocks":
            name = (f"encoder.down.{p[2]}.block.{p[4]}.{names.get(p[5], p[5])}" if p[3] == "resnets"
                    else f"encoder.down.{p[2]}.downsample.conv")
        else:  # decoder.up_blocks: numbered by resolution in the original
            up = levels - 1 - int(p[2])
            name = (f"decoder.up.{up}.block.{p[4]}.{names.get(p[5], p[5])}" if p[3] == "resnets"
                    else f"decoder.up.{up}.upsample.conv")
        out["first_stage_model." + name + "." + wb] = v
    return out


def text_model_keys(sd):
    """transformers' CLIP names with text_model. (transformers 5 saves CLIPTextModel without it)."""
    return {k if k.startswith(("text_model.", "text_projection")) else "text_model." + k: v for k, v in sd.items()}


def clip_to_original(sd):
    out = {CLIP + k: v for k, v in text_model_keys(sd).items()}
    out[CLIP + "text_model.embeddings.position_ids"] = torch.arange(77, dtype=torch.int64)[None]
    return out


def open_clip_to_original(sd):
    sd = text_model_keys(sd)
    t = "text_model."
    out = {OPEN_CLIP + "token_embedding.weight": sd[t + "embeddings.token_embedding.weight"],
           OPEN_CLIP + "positional_embedding": sd[t + "embeddings.position_embedding.weight"],
           OPEN_CLIP + "ln_final.weight": sd[t + "final_layer_norm.weight"],
           OPEN_CLIP + "ln_final.bias": sd[t + "final_layer_norm.bias"],
           OPEN_CLIP + "text_projection": sd["text_projection.weight"].T.contiguous(),  # (width, projection)
           OPEN_CLIP + "logit_scale": torch.tensor(4.6052, dtype=sd["text_projection.weight"].dtype)}
    layers = 1 + max(int(k.split(".")[3]) for k in sd if k.startswith(t + "encoder.layers."))
    modules = {"layer_norm1": "ln_1", "layer_norm2": "ln_2", "self_attn.out_proj": "attn.out_proj",
               "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
    for i in range(layers):
        src, dst = f"{t}encoder.layers.{i}.", f"{OPEN_CLIP}transformer.resblocks.{i}."
        for wb in ("weight", "bias"):
            for a, b in modules.items():
                out[f"{dst}{b}.{wb}"] = sd[f"{src}{a}.{wb}"]
            out[f"{dst}attn.in_proj_{wb}"] = torch.cat([sd[f"{src}self_attn.{q}_proj.{wb}"] for q in "qkv"])
    return out


def write_single_file(model_dir, target):
    from diffusers import StableDiffusionXLPipeline
    pipe = StableDiffusionXLPipeline.from_pretrained(model_dir, torch_dtype=torch.float16, add_watermarker=False)
    sd = {}
    sd.update(unet_to_original(pipe.unet.state_dict(), pipe.unet.config))
    sd.update(vae_to_original(pipe.vae.state_dict(), pipe.vae.config))
    sd.update(clip_to_original(pipe.text_encoder.state_dict()))
    sd.update(open_clip_to_original(pipe.text_encoder_2.state_dict()))
    save_file({k: v.contiguous() for k, v in sd.items()}, target,
              metadata={"modelspec.architecture": "stable-diffusion-xl-v1-base"})
    print(f"single file: {len(sd)} tensors, {os.path.getsize(target)} bytes", flush=True)

    # diffusers' own conversion back must give the folder's tensors, each one. The tiny encoders are both 8 wide,
    # and from_single_file tells SDXL's second encoder from its first by width (768 against 1280), so it would
    # read text_encoder_2 from embedders.0: the second is given to it and checked through the converter it calls,
    # convert_open_clip_checkpoint, directly.
    from diffusers.loaders.single_file_utils import convert_open_clip_checkpoint
    back = StableDiffusionXLPipeline.from_single_file(target, config=model_dir, torch_dtype=torch.float16,
                                                      text_encoder_2=pipe.text_encoder_2, add_watermarker=False)
    converted = convert_open_clip_checkpoint(pipe.text_encoder_2, load_file(target), prefix=OPEN_CLIP)
    for part in ("unet", "vae", "text_encoder", "text_encoder_2"):
        want = text_model_keys(getattr(pipe, part).state_dict()) if part.startswith("text") else getattr(pipe, part).state_dict()
        got = (text_model_keys(converted) if part == "text_encoder_2" else
               text_model_keys(getattr(back, part).state_dict()) if part.startswith("text") else getattr(back, part).state_dict())
        want = {k: v for k, v in want.items() if not k.endswith("position_ids")}
        got = {k: v for k, v in got.items() if not k.endswith("position_ids")}
        assert set(want) == set(got), f"{part}: names differ: {sorted(set(want) ^ set(got))[:6]}"
        for k, v in want.items():
            assert torch.equal(v, got[k]), f"{part}.{k}: from_single_file's tensor differs from the folder's"
        print(f"single file: from_single_file's {part} equals the folder's ({len(want)} tensors)", flush=True)


def export_loras(model_dir, pipeline_dir, out, gen):
    from diffusers import StableDiffusionXLPipeline
    from diffusers.utils import convert_state_dict_to_kohya
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    def load():
        p = StableDiffusionXLPipeline.from_pretrained(model_dir, torch_dtype=torch.float32, add_watermarker=False)
        p.set_progress_bar_config(disable=True)
        return p

    pipe = load()
    parts = ("unet", "text_encoder", "text_encoder_2")
    for part in parts:
        getattr(pipe, part).add_adapter(LoraConfig(r=4, lora_alpha=4, init_lora_weights="gaussian",
                                                   target_modules=UNET_TARGETS if part == "unet" else TEXT_TARGETS))
        randomize(getattr(pipe, part), gen, only=lambda name: "lora_" in name)
    peft = {}
    for part in parts:
        peft.update({f"{part}.{k}": v for k, v in get_peft_model_state_dict(getattr(pipe, part)).items()})
    save_file({k: v.contiguous() for k, v in peft.items()}, os.path.join(out, "lora_peft.safetensors"))
    # kohya: the U-Net under the original layout's names, the text encoders under text_model., alpha 8 at rank 4
    unet_peft = {k[5:]: v for k, v in peft.items() if k.startswith("unet.")}
    original = {}
    for k, v in unet_peft.items():
        module, _, factor = k.partition(".lora_")
        original["unet." + unet_module_to_original(module, pipe.unet.config) + ".lora_" + factor] = v
    text_peft = {k: v for k, v in peft.items() if not k.startswith("unet.")}
    kohya = {}
    for k, v in convert_state_dict_to_kohya({**original, **text_peft}).items():
        for te in ("lora_te1_", "lora_te2_"):
            if k.startswith(te) and not k.startswith(te + "text_model_"):
                k = te + "text_model_" + k[len(te):]
        kohya[k] = torch.tensor(8.0) if k.endswith(".alpha") else (v / 2 if ".lora_up." in k else v)
    save_file({k: v.contiguous() for k, v in kohya.items()}, os.path.join(out, "lora_kohya.safetensors"))
    print(f"lora: {len(peft)} PEFT tensors, {len(kohya)} kohya tensors", flush=True)

    refs = load_file(os.path.join(pipeline_dir, "pipelines.safetensors"))
    with open(os.path.join(pipeline_dir, "pipelines.json")) as f:
        case = next(c for c in json.load(f)["cases"] if c["name"] == CASE)
    # diffusers' kohya conversion names the text encoders' modules text_model.*, as transformers 4 named them;
    # transformers 5's CLIPTextModel has no text_model. level (its CLIPTextModelWithProjection keeps it), so diffusers
    # finds none of the first encoder's modules (its rank table comes out empty). The converted names of an encoder
    # without that level are mapped onto its modules', nothing else changed (the alphas included).
    converted = StableDiffusionXLPipeline.lora_state_dict.__func__
    flat = [part for part in ("text_encoder", "text_encoder_2")
            if not any(n.startswith("text_model.") for n, _ in getattr(pipe, part).named_modules())]

    def rename(key):
        for part in flat:
            key = key.replace(f"{part}.text_model.", f"{part}.") if key.startswith(f"{part}.") else key
        return key

    def lora_state_dict(cls, *args, **kwargs):
        out = list(converted(cls, *args, **kwargs))
        for i in (0, 1):  # the state dict, the network alphas
            if out[i]:
                out[i] = {rename(k): v for k, v in out[i].items()}
        return tuple(out)
    StableDiffusionXLPipeline.lora_state_dict = classmethod(lora_state_dict)

    tensors, cases, fused, ok = {}, [], {}, True  # fused: the PEFT file's fused weights, for the kohya file's
    for fmt in ("peft", "kohya"):
        try:
            p = load()
            before = {m: {k: v.clone() for k, v in getattr(p, m).state_dict().items()} for m in parts}
            p.load_lora_weights(out, weight_name=f"lora_{fmt}.safetensors", adapter_name="x")
            p.fuse_lora(lora_scale=LORA_SCALE, components=list(parts))
            p.unload_lora_weights()
            changed = {}
            for m in parts:
                for k, v in getattr(p, m).state_dict().items():
                    k0 = k.replace(".base_layer", "")
                    if k0 in before[m] and not torch.equal(before[m][k0], v):
                        changed[f"{m}.{k0}"] = v.float()
            targeted = sum(1 for k in peft if ".lora_A." in k)
            assert len(changed) == targeted, f"{fmt}: fuse_lora changed {len(changed)} weights, {targeted} targeted"
            if fmt == "peft":
                fused = changed
            else:
                worst = max(float((changed[k] - v).abs().max()) for k, v in fused.items())
                print(f"lora kohya: max |fused - PEFT's fused| {worst:.3g}", flush=True)
            kw = dict(prompt=case["prompt"], negative_prompt=case["negative_prompt"] or None,
                      num_inference_steps=case["steps"], guidance_scale=case["guidance"], height=case["height"],
                      width=case["width"], latents=refs[f"{CASE}.latents"])
            with torch.no_grad():
                with RecordNoise("diffusers.schedulers.scheduling_euler_ancestral_discrete") as noise:
                    final = p(**kw, output_type="latent", generator=torch.Generator().manual_seed(case["seed"])).images
                img = p(**kw, output_type="pt", generator=torch.Generator().manual_seed(case["seed"])).images
            for i in case["step_noises"]:
                assert torch.equal(noise.drawn[i], refs[f"{CASE}.step_noise_{i}"]), f"{fmt}: step noise {i} differs"
            tensors[f"{fmt}.final_latents"] = final
            tensors[f"{fmt}.image"] = img
            cases.append(dict(lora=f"lora_{fmt}.safetensors", scale=LORA_SCALE, case=CASE))
            print(f"lora {fmt}: {len(changed)} weights fused; image mean {float(img.mean()):.4f}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported, the other goes on
            ok = False
            print(f"lora {fmt}: FAILED {e!r}\n{traceback.format_exc()}", flush=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out, "lora_cases.safetensors"))
    with open(os.path.join(out, "lora_cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pipeline_dir", nargs="?", help="export_tiny_sdxl_pipeline.py's output (tests/data/tiny_sdxl_pipeline)")
    ap.add_argument("out", nargs="?", help="tests/data/tiny_sdxl_single_file")
    ap.add_argument("--full", nargs=2, metavar=("MODEL_DIR", "FILE"), help="a full-size folder as one file (see above)")
    a = ap.parse_args()
    if a.full:
        torch.set_grad_enabled(False)
        write_single_file(*a.full)
        sys.exit(0)
    if not a.out:
        ap.error("PIPELINE_DIR and OUT_DIR are needed without --full")
    model_dir = os.path.join(a.pipeline_dir, "model")
    if not os.path.isfile(os.path.join(a.pipeline_dir, "pipelines.json")):
        sys.exit(f"{a.pipeline_dir}: no pipelines.json (run tools/reference/export_tiny_sdxl_pipeline.py first)")
    os.makedirs(a.out, exist_ok=True)
    torch.set_grad_enabled(False)
    gen = torch.Generator().manual_seed(2828)
    with tempfile.TemporaryDirectory() as tmp:
        single = os.path.join(tmp, "tiny_sdxl.safetensors")
        write_single_file(model_dir, single)
        sources = [os.path.join(model_dir, rel) for rel in (
            "unet/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors",
            "text_encoder/model.safetensors", "text_encoder_2/model.safetensors")]
        pack_files(sources, {"tiny_sdxl": (single, "export_tiny_sdxl_single_file.py's tiny_sdxl.safetensors")}, a.out,
                   os.path.join(a.out, "tiny_sdxl_extras.safetensors"))
    ok = export_loras(model_dir, a.pipeline_dir, a.out, gen)
    print_file_sizes(a.out)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
