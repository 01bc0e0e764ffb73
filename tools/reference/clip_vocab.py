"""CLIP's vocabulary and merges from the published bpe_simple_vocab_16e6.txt.gz, the way CLIP's
simple_tokenizer.py builds its encoder: the 256 byte-unicode characters, the same with </w>, one token per
merge (the first 49152 - 256 - 2 = 48894), then <|startoftext|> and <|endoftext|>.
"""
import gzip
import json
import os


def bytes_to_unicode():
    """CLIP's table: printable bytes map to themselves, the rest to 256 + n in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def load(gz_path):
    """(vocab: token -> id, merges: list of 'a b' lines)."""
    with gzip.open(gz_path, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = lines[1 : 49152 - 256 - 2 + 1]
    units = list(bytes_to_unicode().values())
    tokens = units + [u + "</w>" for u in units] + ["".join(m.split()) for m in merges]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    return {t: i for i, t in enumerate(tokens)}, merges


def write_vocab_and_merges(gz_path, out_dir):
    """out_dir/vocab.json and out_dir/merges.txt, as published checkpoints ship them."""
    vocab, merges = load(gz_path)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return os.path.join(out_dir, "vocab.json"), os.path.join(out_dir, "merges.txt")
