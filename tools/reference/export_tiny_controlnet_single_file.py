"""ControlNets in the original (ControlNet's cldm) single-file layout, checked by diffusers' own from_single_file, for
rtvd's CPU tests of pipeline/model_files/controlnet_single_file.* (issue 29, tests/controlnet_single_file_test.cpp).

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_controlnet_single_file.py \
        tests/data/tiny_sd tests/data/tiny_controlnet_single_file

(CPU only, a few seconds; torch, safetensors and diffusers; about 1.1 MB written, 0.83 MB of it the fp16 weights.)
TINY_SD_DIR is tests/data/tiny_sd. OUT_DIR gets:
  controlnet/            ControlNetModel.from_unet(tiny_sd's unet, conditioning_embedding_out_channels=(4, 8, 12,
                         16)) with every parameter random, saved by diffusers in fp16 (config.json,
                         diffusion_pytorch_model.safetensors).
  tiny_controlnet.manifest.json, tiny_controlnet_prefixed.manifest.json, extras.safetensors
                         the same ControlNet as one file in the original layout, without and with the control_model.
                         prefix: input_hint_block.0 to 14 by 2 (the conditioning embedding), time_embed.0/2,
                         input_blocks.*, middle_block.* (the U-Net's names, as export_tiny_sdxl_single_file.py maps
                         them), zero_convs.N.0, middle_block_out.0. Each is written to a temporary folder, read back
                         by diffusers' ControlNetModel.from_single_file(config=controlnet/), whose every tensor must
                         equal the folder's, and packed as pack_sd_refs.py packs SD's single files (every tensor's
                         bytes are the folder's, so extras.safetensors is empty): tests rebuild them byte for byte.
  sd15_controlnet.layout.json, sd21_controlnet.layout.json, sdxl_controlnet.layout.json
                         full-size ControlNets of SD 1.5 (lllyasviel/sd-controlnet-canny's architecture), SD 2.1
                         (thibaud/controlnet-sd21's) and SDXL (diffusers/controlnet-canny-sdxl-1.0's), built on the
                         meta device: "config", the config.json diffusers saves for each, and "tensors", each
                         tensor's original-layout name, dtype (F16, as published) and shape, for the test to infer
                         the config from shapes and compare it with diffusers'.
"""
import argparse
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_tiny_sd import print_file_sizes, randomize  # noqa: E402
from export_tiny_sdxl_single_file import split_module, unet_module_to_original  # noqa: E402
from pack_sd_refs import pack_files  # noqa: E402

PREFIX = "control_model."
SD_DOWN = ("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D")
FULL_SIZE = {
    "sd15_controlnet": dict(cross_attention_dim=768, attention_head_dim=8, down_block_types=SD_DOWN),
    "sd21_controlnet": dict(cross_attention_dim=1024, attention_head_dim=[5, 10, 20, 20], use_linear_projection=True,
                            down_block_types=SD_DOWN),
    "sdxl_controlnet": dict(cross_attention_dim=2048, attention_head_dim=[5, 10, 20], use_linear_projection=True,
                            block_out_channels=[320, 640, 1280], transformer_layers_per_block=[1, 2, 10],
                            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
                            addition_embed_type="text_time", addition_time_embed_dim=256,
                            projection_class_embeddings_input_dim=2816),
}


def controlnet_module_to_original(name, config):
    """A diffusers ControlNetModel module (without .weight/.bias) -> its name in the original (cldm) layout."""
    p = name.split(".")
    hint_convs = 2 * (len(config["conditioning_embedding_out_channels"]) - 1) + 2
    if p[0] == "controlnet_cond_embedding":
        index = 0 if p[1] == "conv_in" else 2 * (hint_convs - 1) if p[1] == "conv_out" else 2 * (int(p[2]) + 1)
        return f"input_hint_block.{index}"
    if p[0] == "controlnet_down_blocks":
        return f"zero_convs.{p[1]}.0"
    if p[0] == "controlnet_mid_block":
        return "middle_block_out.0"
    # the copy of the U-Net's encoder: its names (no up path, so no up_block_types)
    return unet_module_to_original(name, {"layers_per_block": config["layers_per_block"], "up_block_types": []})


def to_original(sd, config, prefix):
    out = {}
    for k, v in sd.items():
        module, wb = split_module(k)
        out[prefix + controlnet_module_to_original(module, config) + "." + wb] = v
    return out


def write_tiny(tiny_sd, out, gen):
    from diffusers import ControlNetModel, UNet2DConditionModel
    unet = UNet2DConditionModel.from_pretrained(os.path.join(tiny_sd, "unet"))
    net = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=(4, 8, 12, 16))
    randomize(net, gen)
    net = net.half()
    folder = os.path.join(out, "controlnet")
    net.save_pretrained(folder, safe_serialization=True)
    want = {k: v.contiguous() for k, v in net.state_dict().items()}
    with tempfile.TemporaryDirectory() as tmp:
        singles = {}
        for name, prefix in (("tiny_controlnet", ""), ("tiny_controlnet_prefixed", PREFIX)):
            path = os.path.join(tmp, name + ".safetensors")
            save_file(to_original(want, net.config, prefix), path)
            back = ControlNetModel.from_single_file(path, config=folder, torch_dtype=torch.float16).state_dict()
            assert set(back) == set(want), f"{name}: names differ: {sorted(set(back) ^ set(want))[:6]}"
            for k, v in want.items():
                assert torch.equal(v, back[k]), f"{name}: {k}: from_single_file's tensor differs from the folder's"
            print(f"{name}: from_single_file equals the folder ({len(want)} tensors)", flush=True)
            singles[name] = (path, f"export_tiny_controlnet_single_file.py's {name}.safetensors")
        pack_files([os.path.join(folder, "diffusion_pytorch_model.safetensors")], singles, out,
                   os.path.join(out, "extras.safetensors"))


def write_full_size_layouts(out):
    from diffusers import ControlNetModel
    for name, kwargs in FULL_SIZE.items():
        with torch.device("meta"):
            net = ControlNetModel(**kwargs)
        with tempfile.TemporaryDirectory() as tmp:
            net.save_config(tmp)
            with open(os.path.join(tmp, "config.json")) as f:
                config = json.load(f)
        sd = to_original(net.state_dict(), net.config, "")
        tensors = [[k, "F16", list(v.shape)] for k, v in sd.items()]
        with open(os.path.join(out, name + ".layout.json"), "w") as f:
            json.dump({"source": f"export_tiny_controlnet_single_file.py: ControlNetModel(**{kwargs})",
                       "config": config, "tensors": tensors}, f, separators=(",", ":"))
        print(f"{name}: {len(tensors)} tensors", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tiny_sd", help="tests/data/tiny_sd")
    ap.add_argument("out", help="tests/data/tiny_controlnet_single_file")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_grad_enabled(False)
    write_tiny(a.tiny_sd, a.out, torch.Generator().manual_seed(2929))
    write_full_size_layouts(a.out)
    print_file_sizes(a.out)


if __name__ == "__main__":
    main()
