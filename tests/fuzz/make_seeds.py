#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/ (docs/fuzzing.md): the model configs of the tree, small
safetensors files and PNGs of every colour type, bit depth and filter, each one valid for the format, and
tokenizer folders with prompts. The seeds are checked in; run this again after changing it:
python3 tests/fuzz/make_seeds.py"""
import functools
import json
import os
import shutil
import struct
import subprocess
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(parser, name, data):
    folder = os.path.join(CORPUS, parser)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ---- model_config: the configs rtvd ships and tests, and the optional keys' variants ----
def configs():
    for src, name in [("assets/default/config.json", "default.json"), ("assets/sd15/config.json", "sd15.json"),
                      ("assets/sd21/config.json", "sd21.json"), ("tests/data/tiny_batch/config.json", "tiny_batch.json"),
                      ("tests/data/tiny_group/config.json", "tiny_group.json")]:
        shutil.copyfile(os.path.join(ROOT, src), os.path.join(CORPUS, "model_config", name))
    minimal = {"name": "m", "dtype": "float32", "sample_size": 8, "in_channels": 3, "out_channels": 3,
               "block_out_channels": [8], "layers_per_block": 1, "norm": "group", "norm_num_groups": 4,
               "attention_levels": [False], "attention_head_dim": 4}
    write("model_config", "minimal.json", json.dumps(minimal).encode())
    heads = dict(minimal, block_out_channels=[8, 16, 16, 32], attention_levels=[True, False, True, False],
                 num_attention_heads=2, transformer_layers_per_block=2, cross_attention_dim=12, context_length=5,
                 use_linear_projection=False, mid_attention=False, norm="batch", sample_size=16,
                 num_class_embeds=3, class_names=["a", "b"], flip_sin_to_cos=False, freq_shift=1,
                 timestep_scale=1, norm_eps=1e-6)
    del heads["attention_head_dim"]
    write("model_config", "every_key.json", json.dumps(heads, indent=1).encode())


# ---- safetensors: 8-byte length, JSON header padded with spaces, data ----
DTYPES = {"F64": ("<d", 8), "F32": ("<f", 4), "F16": ("<e", 2), "BF16": (None, 2), "I64": ("<q", 8),
          "I32": ("<i", 4), "I16": ("<h", 2), "I8": ("<b", 1), "U8": ("<B", 1), "BOOL": ("<?", 1)}


def safetensors(tensors, metadata=None, pad=True, order=None):
    """tensors: [(name, dtype, shape, bytes)], laid out in list order; order: the header's key order."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    spans = {}
    for name, dtype, shape, data in tensors:
        spans[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    for name in (order or [t[0] for t in tensors]):
        header[name] = spans[name]
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def values(dtype, count, start=0.5):
    fmt, size = DTYPES[dtype]
    if fmt is None:  # bf16: the high half of an f32
        return b"".join(struct.pack("<f", start + i)[2:] for i in range(count))
    if fmt in ("<d", "<f", "<e"):
        return b"".join(struct.pack(fmt, start + i) for i in range(count))
    return b"".join(struct.pack(fmt, (i % 2) if fmt == "<?" else i) for i in range(count))


def safetensors_seeds():
    write("safetensors", "empty.safetensors", safetensors([]))
    write("safetensors", "metadata_only.safetensors", safetensors([], {"format": "pt", "note": "seed"}))
    write("safetensors", "one_f32.safetensors", safetensors([("w", "F32", [2, 3], values("F32", 6))]))
    write("safetensors", "every_dtype.safetensors",
          safetensors([(f"t_{d.lower()}", d, [3], values(d, 3)) for d in DTYPES], {"format": "pt"}))
    write("safetensors", "empty_tensors.safetensors",
          safetensors([("scalar", "F16", [], values("F16", 1)), ("none", "F32", [0, 4], b""),
                       ("also_none", "I8", [4, 0], b""), ("after", "U8", [2], b"\x01\x02")]))
    # Header not a multiple of 8 long: the data section starts unaligned.
    write("safetensors", "unaligned.safetensors",
          safetensors([("a", "F32", [3], values("F32", 3)), ("b", "F64", [1], values("F64", 1))], pad=False))
    # Key order differs from file order.
    write("safetensors", "reordered.safetensors",
          safetensors([("first", "F16", [2, 2], values("F16", 4)), ("second", "BF16", [4], values("BF16", 4)),
                       ("third", "I32", [1, 1, 2], values("I32", 2))], order=["third", "first", "second"]))
    # The default model's first parameter names, at small shapes.
    names = ["time_embedding.linear_1.weight", "time_embedding.linear_1.bias", "class_embedding.weight",
             "conv_in.weight", "conv_in.bias", "down_blocks.0.resnets.0.norm1.running_mean",
             "mid_block.attentions.0.transformer_blocks.0.attn1.to_q.weight", "conv_out.weight"]
    write("safetensors", "model_names.safetensors",
          safetensors([(n, "F16", [2, 2] if n.endswith("weight") else [2],
                        values("F16", 4 if n.endswith("weight") else 2)) for n in names]))
    write("safetensors", "special_values.safetensors",
          safetensors([("f32", "F32", [4], struct.pack("<4f", 0.0, -0.0, 1e-45, 3.4e38)),
                       ("f16", "F16", [3], struct.pack("<3e", 65504.0, 6e-8, -2.0))]))
    # Offsets that start at 2^64 - 1: the reader refuses them, and the mutators must not index with them (the
    # NaN poisoning once wrote to data[begin] because begin + 4 wrapped).
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [2**64 - 1, 8]}},
                        separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    write("safetensors", "offsets_at_max.safetensors", struct.pack("<Q", len(header)) + header + values("F32", 2))


# ---- png: signature, chunks with CRCs, one zlib stream of filtered rows ----
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width, height, depth, color, rows, palette=None, trns=None, interlace=0, idat_parts=1, extra=()):
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, interlace)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    for kind, data in extra:
        out += chunk(kind, data)
    if palette is not None:
        out += chunk(b"PLTE", palette)
    if trns is not None:
        out += chunk(b"tRNS", trns)
    z = zlib.compress(rows, 9)
    step = -(-len(z) // idat_parts)
    for i in range(0, len(z), step):
        out += chunk(b"IDAT", z[i:i + step])
    return out + chunk(b"IEND", b"")


CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def rows_for(width, height, depth, color, filters=(0,), levels=256):
    """Scanlines of a gradient of `levels` byte values (filter bytes filters[y % len], data unfiltered)."""
    row_bytes = (width * CHANNELS[color] * depth + 7) // 8
    out = b""
    for y in range(height):
        out += bytes([filters[y % len(filters)]]) + bytes((x * 7 + y * 13) % levels for x in range(row_bytes))
    return out


def adam7_rows(width, height, depth, color):
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    out = b""
    for x0, y0, dx, dy in passes:
        w, h = (width - x0 + dx - 1) // dx, (height - y0 + dy - 1) // dy
        if w > 0 and h > 0:
            out += rows_for(w, h, depth, color, filters=(1, 2))
    return out


def png_seeds():
    every_filter = (0, 1, 2, 3, 4)
    for color, name in [(0, "grey"), (2, "rgb"), (4, "grey_alpha"), (6, "rgba")]:
        write("png", f"{name}8.png", png(7, 5, 8, color, rows_for(7, 5, 8, color, every_filter)))
        write("png", f"{name}16.png", png(5, 3, 16, color, rows_for(5, 3, 16, color, every_filter)))
    palette = bytes(v for i in range(16) for v in (i * 16, 255 - i * 16, i * 5))
    write("png", "palette8_trns.png", png(6, 4, 8, 3, rows_for(6, 4, 8, 3, levels=16), palette=palette,
                                          trns=bytes([0, 128, 255])))
    for depth in (1, 2, 4):
        # 0x1b packs indices below 2^depth at every depth: 0,0,0,1,1,0,1,1 / 0,1,2,3 / 1,11.
        rows = b"".join(b"\0" + b"\x1b" * ((9 * depth + 7) // 8) for _ in range(3))
        write("png", f"palette{depth}.png", png(9, 3, depth, 3, rows, palette=palette[:3 * (1 << depth)]))
        write("png", f"grey{depth}.png", png(9, 3, depth, 0, rows_for(9, 3, depth, 0)))
    write("png", "grey8_trns.png", png(4, 4, 8, 0, rows_for(4, 4, 8, 0), trns=struct.pack(">H", 13)))
    write("png", "rgb8_trns_split.png", png(4, 4, 8, 2, rows_for(4, 4, 8, 2, every_filter),
                                            trns=struct.pack(">HHH", 0, 13, 26), idat_parts=3))
    write("png", "rgba8_interlaced.png", png(9, 9, 8, 6, adam7_rows(9, 9, 8, 6), interlace=1))
    write("png", "rgb8_ancillary.png", png(3, 2, 8, 2, rows_for(3, 2, 8, 2), palette=palette[:6],
                                           extra=[(b"gAMA", struct.pack(">I", 45455)), (b"tEXt", b"Comment\0seed")]))
    # An independent encoder's output, with the chunks it adds.
    if shutil.which("ffmpeg"):
        for pix_fmt in ("rgb48be", "pal8", "ya8"):
            path = os.path.join(CORPUS, "png", f"ffmpeg_{pix_fmt}.png")
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=8x6", "-frames:v", "1",
                            "-pix_fmt", pix_fmt, path], check=True)


# ---- clip_tokenizer: a prompt, then each file as "\n==> NAME <==\n" and its text (tests/fuzz/fuzz_targets.h) ----
def byte_units():
    """CLIP's bytes_to_unicode, in its vocabulary's order: the printable Latin-1 bytes, then the others."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    others = [b for b in range(256) if b not in printable]
    return [(b, chr(b)) for b in printable] + [(b, chr(0x100 + n)) for n, b in enumerate(others)]


UNIT = dict(byte_units())


def word_merges(word):
    """Merges that build word (lowercase) from its bytes, left to right, the last byte with </w>."""
    units = [UNIT[b] for b in word.encode()]
    units[-1] += "</w>"
    return [("".join(units[:k]), units[k]) for k in range(1, len(units))]


def tiny_tokenizer(words):
    """The 512 byte tokens, a token per merge, BOS and EOS (ids in that order); and the merges."""
    tokens = [u for _, u in byte_units()] + [u + "</w>" for _, u in byte_units()]
    merges = []
    for w in words:
        for a, b in word_merges(w):
            if a + b not in tokens:
                tokens.append(a + b)
                merges.append((a, b))
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    return {t: i for i, t in enumerate(tokens)}, merges


def tokenizer_input(prompt, files):
    return prompt.encode() + b"".join(b"\n==> " + name.encode() + b" <==\n" + text for name, text in files)


def dump(value):
    return json.dumps(value, ensure_ascii=False).encode()


def clip_tokenizer_seeds():
    # vocab.json and merges.txt, no pad token named (<|endoftext|>), a CRLF line and a blank line at the end.
    vocab, merges = tiny_tokenizer(["a", "photo", "of", "cat", "don", "'t", "stop"])
    merges_txt = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges).replace("\n", "\r\n", 1) + "\n"
    write("clip_tokenizer", "vocab_merges", tokenizer_input(
        "A photo of a CAT, don't stop!", [("vocab.json", dump(vocab)), ("merges.txt", merges_txt.encode())]))
    # tokenizer.json with merges in both spellings, an added token "!" that is also the pad (SD 2.x).
    vocab, merges = tiny_tokenizer(["hello", "world", "end", "caf\u00e9"])
    added = [{"id": vocab[t], "content": t, "special": True, "normalized": False}
             for t in ("<|startoftext|>", "<|endoftext|>", "!")]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "end_of_word_suffix": "</w>",
             "vocab": vocab, "merges": [f"{a} {b}" if i % 2 else [a, b] for i, (a, b) in enumerate(merges)]}
    write("clip_tokenizer", "tokenizer_json", tokenizer_input(
        "hello!world!! <|endoftext|> end <|ENDOFTEXT|> Caf\u00e9 cafe\u0301",
        [("tokenizer.json", dump({"version": "1.0", "added_tokens": added, "model": model})),
         ("special_tokens_map.json", dump({"pad_token": "!"}))]))
    # The pad token from tokenizer_config.json as an object, special_tokens_map.json naming none; an emoji token.
    vocab, merges = tiny_tokenizer(["\U0001f600", "\uac01", "na\u00efve"])
    write("clip_tokenizer", "pad_in_config", tokenizer_input(
        "na\u00efve \U0001f600\U0001f600 \u1100\u1161\u11a8 \uac01",
        [("vocab.json", dump(vocab)), ("merges.txt", "".join(f"{a} {b}\n" for a, b in merges).encode()),
         ("special_tokens_map.json", dump({"bos_token": "<|startoftext|>", "pad_token": None})),
         ("tokenizer_config.json", dump({"pad_token": {"content": "!", "lstrip": False}, "model_max_length": 77}))]))
    # Prompts alone, for the built-in vocabulary.
    prompts = {
        "combining": "e\u0301 a\u0301\u0302\u0303\u0304 \u1e9b\u0323 \u0301start \u304b\u3099",
        "hangul": "\u1100\u1161\u11a8 \uac01 \u3131 \u1100 \u11a8\u11a8",
        "emoji": "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f44d\U0001f3fd "
                 "\U0001f1fa\U0001f1f3 \u2764\ufe0f 1\ufe0f\u20e3",
        "case": "\u0130stanbul STRASSE \u1e9e \u03a3\u0391\u03a3 \u01c5 \u212a \ufb03 \u212b",
        "white_space": "a\u00a0b\u3000c\u2028d\te\u200bf\r\n\u0085g  \ufeffh",
        "specials": "<|startoftext|>x<|endoftext|> <|ENDOFTEXT|> it's 'S we'll 1080p \u00bd\u00b2\u0663\u216b",
        "long": "masterpiece, " * 100,
    }
    for name, prompt in prompts.items():
        write("clip_tokenizer", f"prompt_{name}", prompt.encode())
    write("clip_tokenizer", "prompt_invalid_utf8", b"a fox \xff \xc0\xaf \xed\xa0\x80 \xe2\x82")


# ---- lora: one LoRA of fuzz_targets.h's model (lora_target_unet, lora_target_text_encoder) in each format ----
LORA_UNET = {"conv_in": [8, 4, 3, 3], "time_embedding.linear_1": [32, 8], "down_blocks.0.resnets.0.conv1": [8, 8, 3, 3],
             "down_blocks.0.resnets.0.time_emb_proj": [8, 32], "down_blocks.0.attentions.0.proj_in": [8, 8],
             "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q": [8, 8],
             "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k": [8, 16],
             "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_out.0": [8, 8],
             "down_blocks.0.attentions.0.transformer_blocks.0.ff.net.0.proj": [64, 8],
             "down_blocks.0.downsamplers.0.conv": [8, 8, 3, 3], "mid_block.attentions.0.proj_out": [8, 8, 1, 1],
             "up_blocks.0.resnets.0.conv_shortcut": [8, 16, 1, 1], "up_blocks.0.upsamplers.0.conv": [8, 8, 3, 3]}
LORA_TEXT = {"encoder.layers.0.self_attn.q_proj": [16, 16], "encoder.layers.0.self_attn.out_proj": [16, 16],
             "encoder.layers.0.mlp.fc1": [32, 16], "encoder.layers.0.mlp.fc2": [16, 32]}
# The original layout's names of the fuzz U-Net's modules (one ResNet a level: input_blocks 1, 2 (op), ...).
LORA_UNET_ORIGINAL = {"conv_in": "input_blocks.0.0", "time_embedding.linear_1": "time_embed.0",
                      "down_blocks.0.resnets.0.conv1": "input_blocks.1.0.in_layers.2",
                      "down_blocks.0.resnets.0.time_emb_proj": "input_blocks.1.0.emb_layers.1",
                      "down_blocks.0.attentions.0.proj_in": "input_blocks.1.1.proj_in",
                      "down_blocks.0.downsamplers.0.conv": "input_blocks.2.0.op",
                      "mid_block.attentions.0.proj_out": "middle_block.1.proj_out",
                      "up_blocks.0.resnets.0.conv_shortcut": "output_blocks.0.0.skip_connection",
                      "up_blocks.0.upsamplers.0.conv": "output_blocks.1.1.conv"}


def lora_factors(shape, rank=2):
    down = [rank, shape[1]] + shape[2:]
    up = [shape[0], rank] + ([1, 1] if len(shape) == 4 else [])
    count = lambda s: functools.reduce(lambda a, b: a * b, s, 1)
    return (down, values("F32", count(down), -0.25)), (up, values("F32", count(up), 0.125))


def lora_seeds():
    def tensors(spell):
        out = []
        for text, modules in ((False, LORA_UNET), (True, LORA_TEXT)):
            for module, shape in modules.items():
                keys = spell(module, text)
                if keys is None:
                    continue
                (down_shape, down), (up_shape, up) = lora_factors(shape)
                out += [(keys[0], "F32", down_shape, down), (keys[1], "F32", up_shape, up)]
                if len(keys) > 2:
                    out.append((keys[2], "F32", [], struct.pack("<f", 4.0)))
        return out

    prefix = lambda text: "text_encoder." if text else "unet."
    write("lora", "peft.safetensors", safetensors(tensors(
        lambda m, text: (prefix(text) + m + ".lora_A.weight", prefix(text) + m + ".lora_B.weight"))))

    def diffusers(m, text):
        if not text and m.endswith((".to_q", ".to_k", ".to_out.0")):
            return prefix(text) + m + ".lora.down.weight", prefix(text) + m + ".lora.up.weight"
        if text and "self_attn" in m:
            return prefix(text) + m + ".lora_linear_layer.down.weight", prefix(text) + m + ".lora_linear_layer.up.weight"
        return prefix(text) + m + ".lora_A.weight", prefix(text) + m + ".lora_B.weight"
    write("lora", "diffusers.safetensors", safetensors(tensors(diffusers), {"format": "pt"}))

    def kohya(m, text, names=None):
        stem = ("lora_te_text_model_" if text else "lora_unet_") + ((names or {}).get(m, m)).replace(".", "_")
        return stem + ".lora_down.weight", stem + ".lora_up.weight", stem + ".alpha"
    write("lora", "kohya.safetensors", safetensors(tensors(kohya)))
    write("lora", "kohya_original_names.safetensors",
          safetensors(tensors(lambda m, text: kohya(m, text, LORA_UNET_ORIGINAL) if text or m in LORA_UNET_ORIGINAL else None)))

    def processor(m, text):
        for proj, old in ((".to_q", ".processor.to_q_lora"), (".to_k", ".processor.to_k_lora"),
                          (".to_out.0", ".processor.to_out_lora"), (".q_proj", ".to_q_lora"), (".out_proj", ".to_out_lora")):
            if m.endswith(proj):
                stem = ("text_encoder.text_model." if text else "") + m[:-len(proj)] + old
                return stem + ".down.weight", stem + ".up.weight"
        return None
    write("lora", "attention_processor.safetensors", safetensors(tensors(processor)))
    metadata = {"unet.lora_alpha": 4, "unet.r": 2, "unet.alpha_pattern": {"down_blocks.0.attentions.0.proj_in": 1.5},
                "text_encoder.lora_alpha": 2, "text_encoder.use_rslora": True, "text_encoder.use_dora": False}
    write("lora", "adapter_metadata.safetensors", safetensors(tensors(
        lambda m, text: (prefix(text) + m + ".lora_A.weight", prefix(text) + m + ".lora_B.weight")),
        {"format": "pt", "lora_adapter_metadata": json.dumps(metadata)}))


# ---- single_file: the names of tests/data/single_file's tiny checkpoints, shapes that the inference reads ----
def single_file_seeds():
    def seed(manifest, shapes, keep=None, width=768, metadata=None):
        with open(os.path.join(ROOT, "tests", "data", "single_file", manifest)) as f:
            names = [row[0] for row in json.load(f)["tensors"]]
        out = []
        for name in names + [n for n in shapes if n not in names]:
            if keep is not None and name not in shapes and not any(k in name for k in keep):
                continue
            shape = [d if d != "w" else width for d in shapes.get(name, [1])]
            count = functools.reduce(lambda a, b: a * b, shape, 1)
            out.append((name, "F16", shape, bytes(2 * count)))
        return safetensors(out, metadata)

    u, v, c, o = "model.diffusion_model.", "first_stage_model.", "cond_stage_model.transformer.text_model.", "cond_stage_model.model."
    # What the architecture is read from: level channels (divisible by 32 groups and 8 heads), the context
    # width (768: SD 1.x), the VAE's levels, the text encoder's vocabulary, width, positions and MLP.
    # Only the dimensions read are real: the others are 1.
    unet = {u + "input_blocks.0.0.weight": [32, 4, 1, 1], u + "input_blocks.1.0.in_layers.2.weight": [32, 1, 1, 1],
            u + "input_blocks.4.0.in_layers.2.weight": [64, 1, 1, 1], u + "out.2.weight": [4, 1, 1, 1],
            u + "middle_block.1.proj_in.weight": [1, 1], u + "middle_block.1.transformer_blocks.0.attn2.to_k.weight": [1, "w"]}
    vae = {v + "encoder.conv_in.weight": [1, 3, 1, 1], v + "encoder.down.0.block.0.conv1.weight": [32, 1, 1, 1],
           v + "encoder.down.1.block.0.conv1.weight": [64, 1, 1, 1], v + "decoder.conv_in.weight": [1, 4, 1, 1],
           v + "decoder.conv_out.weight": [3, 1, 1, 1], v + "encoder.mid.attn_1.q.weight": [4, 4, 1, 1]}
    clip = {c + "embeddings.token_embedding.weight": [2, "w"], c + "embeddings.position_embedding.weight": [77, 1],
            c + "encoder.layers.0.mlp.fc1.weight": [3, 1]}
    write("single_file", "sd1_names.safetensors", seed("tiny_sd_sd1.manifest.json", {**unet, **vae, **clip}))
    write("single_file", "sd1_minimal_v.safetensors",
          seed("tiny_sd_sd1.manifest.json", {**unet, **vae, **clip}, keep=["time_embed", "mid.block_1", "middle_block.1.transformer_blocks.0.norm1"],
               metadata={"modelspec.prediction_type": "v", "modelspec.resolution": "768x768"}))
    # OpenCLIP, SD 2.x: heads of 64 (channels 64 and 128), context 1024, in_proj left out (3072 x 1024 does not
    # fit a fuzz input) but for one small block.
    unet2 = dict(unet)
    unet2.update({u + "input_blocks.0.0.weight": [64, 4, 1, 1], u + "input_blocks.1.0.in_layers.2.weight": [64, 1, 1, 1],
                  u + "input_blocks.4.0.in_layers.2.weight": [128, 1, 1, 1]})
    openclip = {o + "token_embedding.weight": [2, "w"], o + "positional_embedding": [77, 1],
                o + "transformer.resblocks.0.mlp.c_fc.weight": [3, 1], o + "transformer.resblocks.1.ln_1.weight": ["w"],
                o + "transformer.resblocks.2.ln_1.weight": [1], o + "text_projection": [1, 1]}
    write("single_file", "sd2_minimal.safetensors",
          seed("tiny_sd_openclip.manifest.json", {**unet2, **vae, **openclip}, keep=["ln_final", "time_embed", "middle_block.1.transformer_blocks.0.norm1"], width=1024,
               metadata={"ss_v_parameterization": "False"}))
    # The OpenCLIP layout whole, narrow (width 8): in_proj split, a width that no architecture has.
    small = {o + "token_embedding.weight": [2, 8], u + "middle_block.1.transformer_blocks.0.attn2.to_k.weight": [1, 8]}
    for i in range(3):
        small[o + f"transformer.resblocks.{i}.attn.in_proj_weight"] = [24, 8]
        small[o + f"transformer.resblocks.{i}.attn.in_proj_bias"] = [24]
    write("single_file", "openclip_names.safetensors", seed("tiny_sd_openclip.manifest.json", {**unet, **vae, **small}))

    # A ControlNet (controlnet_single_file.h, the same fuzzers): tiny_sd's encoder under control_model., the hint
    # block 1 wide, the zero convs of the encoder's widths (32, 32, 32, 64; 64 after the mid block).
    net = {n[len(u):]: shape for n, shape in unet.items() if not n.startswith((u + "out.", u + "output_blocks."))}
    # (numbered as the converter that wrote tiny_sd_sd1 numbers them: 2 ResNets a level, block 2 left out)
    for block, width in ((1, 32), (4, 64)):
        net[f"input_blocks.{block}.0.out_layers.3.weight"] = [width, 1, 1, 1]
    net["input_blocks.3.0.op.weight"] = [32, 1, 1, 1]
    net["middle_block.2.out_layers.3.weight"] = [64, 1, 1, 1]
    for i in range(8):
        out, inputs = (32 if i == 7 else 1), (3 if i == 0 else 1)
        net[f"input_hint_block.{2 * i}.weight"], net[f"input_hint_block.{2 * i}.bias"] = [out, inputs, 3, 3], [out]
    for name, width in [(f"zero_convs.{i}.0", w) for i, w in enumerate((32, 32, 32, 64))] + [("middle_block_out.0", 64)]:
        net[name + ".weight"], net[name + ".bias"] = [width, width, 1, 1], [width]
    with open(os.path.join(ROOT, "tests", "data", "single_file", "tiny_sd_sd1.manifest.json")) as f:
        encoder = [row[0][len(u):] for row in json.load(f)["tensors"]
                   if row[0].startswith(u) and not row[0].startswith((u + "out.", u + "output_blocks."))]
    names = encoder + [n for n in net if n not in encoder]
    tensors = []
    for name in names:
        shape = [d if d != "w" else 768 for d in net.get(name, [1])]
        tensors.append(("control_model." + name, "F16", shape, bytes(2 * functools.reduce(lambda a, b: a * b, shape, 1))))
    write("single_file", "controlnet_names.safetensors", safetensors(tensors))


if __name__ == "__main__":
    for parser in ("model_config", "safetensors", "png", "clip_tokenizer", "lora", "single_file"):
        shutil.rmtree(os.path.join(CORPUS, parser), ignore_errors=True)
        os.makedirs(os.path.join(CORPUS, parser))
    configs()
    safetensors_seeds()
    png_seeds()
    clip_tokenizer_seeds()
    lora_seeds()
    single_file_seeds()
