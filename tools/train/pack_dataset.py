"""Packs Noto (emoji-datasource-google) and Twemoji images into one class-labelled npz.

Called by build_dataset.sh after it has installed the npm packages and rasterised the Twemoji SVGs.
Classes are the emoji.json categories in a fixed order; every image is composited onto white.

The npz holds: images (N, 64, 64, 3) uint8; labels (N,) int64 class ids; val (N,) bool hold-out mask;
sources (N,) "noto:<code points>" / "twemoji:<code points>"; bases (N,) the code points of the base emoji
(skin-tone variants share their base's); class_names (classes,). The null class id is len(class_names).
"""
import argparse
import hashlib
import json
import pathlib
import zipfile

import numpy as np
from PIL import Image

SIZE = 64
VAL_PERCENT = 5

# (emoji.json category, short class name) in class-id order; the null class is len(CLASSES).
CLASSES = [
    ("Smileys & Emotion", "smileys"),
    ("People & Body", "people"),
    ("Animals & Nature", "animals"),
    ("Food & Drink", "food"),
    ("Travel & Places", "travel"),
    ("Activities", "activities"),
    ("Objects", "objects"),
    ("Symbols", "symbols"),
    ("Flags", "flags"),
    ("Component", "components"),
]


def codepoint_key(sequence):
    """'0023-FE0F-20E3' or '23-20e3' -> '23-20e3': lowercase hex without leading zeros, no FE0F.

    Twemoji drops leading zeros and most variation selectors from its file names, emoji.json keeps
    both, so only this form matches across the two.
    """
    points = [int(p, 16) for p in sequence.replace("_", "-").split("-") if p]
    return "-".join(f"{p:x}" for p in points if p != 0xFE0F)


def is_validation(base_key):
    """Deterministic 5% hold-out keyed by the base emoji, so skin-tone variants and both artists'
    drawings of one emoji always land in the same split."""
    digest = hashlib.sha256(base_key.encode()).digest()
    return int.from_bytes(digest[:4], "little") % 100 < VAL_PERCENT


def read_catalogue(emoji_json):
    """Returns {key: (base_key, class_id)} for every emoji and skin variation, and the Noto image list
    [(key, base_key, class_id, file name)]."""
    class_of = {category: i for i, (category, _) in enumerate(CLASSES)}
    catalogue, noto = {}, []
    for entry in json.loads(emoji_json.read_text()):
        label = class_of[entry["category"]]
        base = codepoint_key(entry["unified"])
        variants = [entry] + list(entry.get("skin_variations", {}).values())
        for variant in variants:
            key = codepoint_key(variant["unified"])
            catalogue[key] = (base, label)
            if variant.get("has_img_google"):
                noto.append((key, base, label, variant["image"]))
        if entry.get("non_qualified"):
            catalogue.setdefault(codepoint_key(entry["non_qualified"]), (base, label))
    return catalogue, noto


def load_on_white(path):
    image = Image.open(path).convert("RGBA")
    if image.size != (SIZE, SIZE):
        raise ValueError(f"{path}: expected {SIZE}x{SIZE}, got {image.size}")
    white = Image.new("RGBA", image.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, image).convert("RGB"), dtype=np.uint8)


def collect(datasource, twemoji_png):
    """Returns [(source name, base_key, class_id, image path)] and the unmatched Twemoji names."""
    catalogue, noto = read_catalogue(datasource / "emoji.json")
    records = []
    for key, base, label, file_name in sorted(noto):
        records.append((f"noto:{key}", base, label, datasource / "img/google/64" / file_name))
    unmatched = []
    for path in sorted(twemoji_png.glob("*.png")):
        key = codepoint_key(path.stem)
        if key not in catalogue:
            unmatched.append(path.stem)
            continue
        base, label = catalogue[key]
        records.append((f"twemoji:{key}", base, label, path))
    return records, unmatched


def save_npz_lzma(path, arrays):
    """np.savez with LZMA instead of deflate: about 40% smaller, which matters because the file travels
    to the GPU machine inside a 64 MiB limit; np.load reads it unchanged. Fixed entry timestamps make
    rebuilds byte-identical."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            entry = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_LZMA
            with archive.open(entry, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(array), allow_pickle=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasource", type=pathlib.Path, required=True,
                        help="node_modules/emoji-datasource-google")
    parser.add_argument("--twemoji-png", type=pathlib.Path, required=True,
                        help="folder of 64x64 PNGs rasterised from @twemoji/svg, named by code points")
    parser.add_argument("--out", type=pathlib.Path, required=True,
                        help="output .npz; a .json summary is written next to it")
    args = parser.parse_args()

    records, unmatched = collect(args.datasource, args.twemoji_png)
    images = np.stack([load_on_white(path) for _, _, _, path in records])  # (N, 64, 64, 3) uint8
    labels = np.array([label for _, _, label, _ in records], dtype=np.int64)
    bases = np.array([base for _, base, _, _ in records])
    val = np.array([is_validation(base) for base in bases])
    sources = np.array([name for name, _, _, _ in records])
    class_names = np.array([short for _, short in CLASSES])

    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_npz_lzma(args.out, {"images": images, "labels": labels, "val": val, "sources": sources,
                             "bases": bases, "class_names": class_names})

    summary = {
        "classes": [
            {"id": i, "name": short, "category": category,
             "train": int(np.sum((labels == i) & ~val)), "val": int(np.sum((labels == i) & val))}
            for i, (category, short) in enumerate(CLASSES)
        ],
        "null_class": len(CLASSES),
        "images": len(records),
        "noto": sum(name.startswith("noto:") for name in sources),
        "twemoji": sum(name.startswith("twemoji:") for name in sources),
        "unmatched_twemoji": unmatched,
        "npz_bytes": args.out.stat().st_size,
    }
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "unmatched_twemoji"}, indent=1))


if __name__ == "__main__":
    main()
