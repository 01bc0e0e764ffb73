"""tests/data/tiny_sd's weights written again in shards by diffusers' and transformers' own save_pretrained.

    PYTHONPATH=<diffusers>/src python3 tools/reference/export_tiny_sd_sharded.py TINY_SD OUT_DIR

OUT_DIR/plain/{unet,vae,text_encoder}/ get the shards and index of each component as save_pretrained(
max_shard_size=...) names them (diffusion_pytorch_model-00001-of-0000N.safetensors and
diffusion_pytorch_model.safetensors.index.json; model-...safetensors and model.safetensors.index.json), and
OUT_DIR/fp16/ the same with variant="fp16". Only the weights: put beside tiny_sd's configs, they render tiny_sd's
frames byte for byte (run on the GPU machine, where diffusers is). The indexes are committed in
tests/data/sharded_tiny_sd/, from which tests/sharded_weights_test.cpp writes the shards as they say (the
shards themselves, 12 MB, are not committed).
"""
import os
import sys

import torch
from diffusers import AutoencoderKL, UNet2DConditionModel
from transformers import CLIPTextModel

# Each component's weights are 1.3 to 3.2 MB: shards of at most 1 MB give two to four of each.
SHARD = "1MB"


def main():
    tiny_sd, out = sys.argv[1], sys.argv[2]
    components = {
        "unet": UNet2DConditionModel.from_pretrained(os.path.join(tiny_sd, "unet"), torch_dtype=torch.float16),
        "vae": AutoencoderKL.from_pretrained(os.path.join(tiny_sd, "vae"), torch_dtype=torch.float16),
        "text_encoder": CLIPTextModel.from_pretrained(os.path.join(tiny_sd, "text_encoder"), torch_dtype=torch.float16),
    }
    for variant in ("plain", "fp16"):
        for name, module in components.items():
            where = os.path.join(out, variant, name)
            kwargs = {"variant": "fp16"} if variant == "fp16" else {}
            module.save_pretrained(where, max_shard_size=SHARD, safe_serialization=True, **kwargs)
            os.remove(os.path.join(where, "config.json"))  # tiny_sd's own config stays the one read
            print(variant, name, sorted(os.listdir(where)))


if __name__ == "__main__":
    main()
