"""Commit-sized forms of export_sd_references.py's single files and fused LoRA weights, for rtvd's CPU tests.

    python3 tools/reference/pack_sd_refs.py REFS_DIR TINY_SD_DIR OUT_DIR      (python3 stdlib only)

The single files (tiny_sd_sd1.safetensors, tiny_sd_openclip.safetensors, ~6 MB each) hold the tensors of
TINY_SD_DIR again, under the original layout's names. OUT_DIR/single_file/ gets, for each, NAME.manifest.json:
its metadata and, in file order, every tensor's name, dtype, shape and content key (zlib's crc32 and adler32
of its bytes, and their count); and extras.safetensors, every tensor whose bytes are in none of TINY_SD_DIR's
weights files (the fused in_proj, text_projection), named by its content key. A test rebuilds each file byte
for byte by content, whatever the names say (tests/single_file_test.cpp); this script checks that it can.

lora_fused.safetensors (every weight diffusers' fuse_lora changed, fp32, ~3 MB) becomes
OUT_DIR/lora/lora_fused_sketch.json: per weight its shape, L2 norm, 16 random-sign projections
sum_i s_i x_i (s_i = +1 or -1 from splitmix64, see sign()), whose differences estimate the relative L2 error
of another copy of it, and 32 sampled elements. The three LoRA files are copied as they are.
"""
import json
import os
import shutil
import struct
import sys
import zlib

MASK = (1 << 64) - 1
PROJECTIONS = 16
SAMPLES = 32


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = blob[8 + n:]
    tensors = []
    for name, t in header.items():
        a, b = t["data_offsets"]
        tensors.append((a, name, t["dtype"], t["shape"], data[a:b]))
    tensors.sort()
    return meta, [(name, dtype, shape, raw) for _, name, dtype, shape, raw in tensors]


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def content_key(raw):
    return f"{zlib.crc32(raw):08x}-{zlib.adler32(raw):08x}-{len(raw)}"


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def sign(p, i):
    return -1.0 if splitmix64((p << 40) + i) >> 63 else 1.0


def pack_files(sources, singles, out_dir, extras_path):
    """Each single file (name -> (path, source)) as out_dir/NAME.manifest.json, its tensors found by content among
    the source weights files, the others in extras_path."""
    by_content = {}
    for path in sources:
        for _, _, _, raw in read_safetensors(path)[1]:
            by_content.setdefault(content_key(raw), raw)
    extras = {}
    os.makedirs(out_dir, exist_ok=True)
    for name, (path, source) in singles.items():
        meta, tensors = read_safetensors(path)
        rows = []
        for tname, dtype, shape, raw in tensors:
            key = content_key(raw)
            if key not in by_content:
                extras[key] = (dtype, shape, raw)
            found = by_content.get(key, extras.get(key, (None, None, None))[2])
            assert found == raw, f"{name}: {tname}: content key {key} is not unique"
            rows.append([tname, dtype, shape, key])
        with open(os.path.join(out_dir, name + ".manifest.json"), "w") as f:
            json.dump({"source": source, "metadata": meta, "tensors": rows}, f, indent=0)
        print(f"{name}: {len(rows)} tensors, {sum(1 for r in rows if r[3] in extras)} from extras")
    write_safetensors(extras_path, [(k, d, s, raw) for k, (d, s, raw) in sorted(extras.items())])


def pack_single_files(refs, tiny_sd, out):
    sources = [os.path.join(tiny_sd, rel) for rel in ("unet/diffusion_pytorch_model.safetensors",
                                                      "vae/diffusion_pytorch_model.safetensors",
                                                      "text_encoder/model.safetensors")]
    singles = {name: (os.path.join(refs, name + ".safetensors"), f"export_sd_references.py's {name}.safetensors")
               for name in ("tiny_sd_sd1", "tiny_sd_openclip")}
    pack_files(sources, singles, os.path.join(out, "single_file"), os.path.join(out, "single_file", "extras.safetensors"))


def pack_lora(refs, out):
    os.makedirs(os.path.join(out, "lora"), exist_ok=True)
    for fmt in ("peft", "diffusers", "kohya"):
        shutil.copyfile(os.path.join(refs, f"lora_{fmt}.safetensors"), os.path.join(out, "lora", f"lora_{fmt}.safetensors"))
    _, tensors = read_safetensors(os.path.join(refs, "lora_fused.safetensors"))
    sketch = {}
    for name, dtype, shape, raw in tensors:
        assert dtype == "F32", name
        x = struct.unpack(f"<{len(raw) // 4}f", raw)
        n = len(x)
        samples = sorted({splitmix64(1000 + k) % n for k in range(SAMPLES)})
        sketch[name] = {
            "shape": shape,
            "l2": sum(v * v for v in x) ** 0.5,
            "projections": [sum(v if sign(p, i) > 0 else -v for i, v in enumerate(x)) for p in range(PROJECTIONS)],
            "samples": [[i, x[i]] for i in samples],
        }
    with open(os.path.join(out, "lora", "lora_fused_sketch.json"), "w") as f:
        json.dump({"source": "export_sd_references.py's lora_fused.safetensors (diffusers' load_lora_weights + "
                             "fuse_lora(lora_scale=0.7) of lora_peft.safetensors)", "weights": sketch}, f, indent=0)
    print(f"lora_fused: {len(sketch)} weights sketched")


def main():
    refs, tiny_sd, out = sys.argv[1:4]
    pack_single_files(refs, tiny_sd, out)
    pack_lora(refs, out)


if __name__ == "__main__":
    main()
