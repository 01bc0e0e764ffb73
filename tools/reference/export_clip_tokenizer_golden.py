"""On the GPU machine: the CLIP tokenizer's golden file, ids from transformers.CLIPTokenizer.

    python3 tools/reference/export_clip_tokenizer_golden.py VOCAB_GZ OUT.json [--tokenizer-dir DIR]

The tokenizer is built from CLIP's published merges (clip_vocab.py). The strings are made here from a fixed
seed: prose, prompt-style word lists, punctuation, digits, contractions, accents (composed and decomposed),
CJK, emoji, zero-width and control characters, every kind of whitespace, the empty string, special-token
text and prompts far over 77 tokens. Each case stores the untruncated ids (BOS ... EOS) of the SD 1.x
tokenizer (pad token <|endoftext|>) and, where they differ, "ids_pad_bang": those of the SD 2.x tokenizer,
whose pad token "!" is an added token that transformers splits out of the text as id 0. The script checks
that truncation to 77 keeps BOS, the first 75 and EOS, and pads with the pad token, so the file need not
store both. --tokenizer-dir also
saves the tokenizer as this transformers writes it (tokenizer.json, tokenizer_config.json), for the loader.
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import clip_vocab  # noqa: E402

WORDS = """a the of and to in is it you that he was for on are with as his they be at one have this from or
had by word but what some we can out other were all there when up use your how said an each she which do
their time if will way about many then them write would like so these her long make thing see him two has
look more day could go come did number sound no most people my over know water than call first who may down
side been now find any new work part take get place made live where after back little only round man year
came show every good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air well also play
small end put home read hand port large spell add even land here must big high such follow act why ask men
change went light kind off need house picture try us again animal point mother world near build self earth
father head stand own page should country found answer school grow study still learn plant cover food sun
four between state keep eye never last let thought city tree cross farm hard start might story saw far sea
draw left late run while press close night real life few north open seem together next white children begin
got walk example ease paper group always music those both mark often letter until mile river car feet care
second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure
watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird soon
body dog family direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king space heard
best hour better true during hundred five remember step early hold west ground interest reach fast verb sing
listen six table travel less morning ten simple several vowel toward war lay against pattern slow center love
person money serve appear road map rain rule govern pull cold notice voice unit power town fine certain fly
fall lead cry dark machine note wait plan figure star box noun field rest correct able pound done beauty drive
stood contain front teach week final gave green oh quick develop ocean warm free minute strong special mind
behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object decide
surface deep moon island foot system busy test record boat common gold possible plane stead dry wonder laugh
thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill east paint
language among""".split()

PROMPT_WORDS = """masterpiece best quality highly detailed 8k uhd photorealistic cinematic lighting volumetric
fog octane render unreal engine trending on artstation concept art watercolor oil painting portrait landscape
sharp focus bokeh depth of field golden hour studio ghibli cyberpunk steampunk synthwave vaporwave baroque
impressionist ukiyo-e anime manga line art low poly isometric macro wide-angle fisheye hdr film grain
kodachrome polaroid sketch charcoal pastel gouache fox owl dragon castle forest nebula astronaut robot
samurai cat corgi koi lantern waterfall canyon glacier volcano reef bioluminescent iridescent""".split()

SCRIPTS = [
    "café naïve façade jalapeño crème brûlée Ångström Øresund Łódź São Paulo Zürich",
    "ÉCOLE ÀÉÎÕÜ ÑANDÚ STRASSE straße Maße İstanbul ıi ΣΑΣ ΟΔΥΣΣΕΥΣ ὈΔΥΣΣΕΎΣ Москва МОСКВА",
    "cafe\u0301 nai\u0308ve A\u030angstro\u0308m e\u0301\u0301 o\u0308\u0304 \u1100\u1161\u11a8 \u1112\u1161\u11ab",
    "日本語のテキスト 中文文本 한국어 텍스트 ｆｕｌｌｗｉｄｔｈ ＡＢＣ　１２３ ﾊﾝｶｸ カタカナ ひらがな",
    "😀 😂 🥲 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵 🇺🇸 ❤️ ☕ 🦊🎨 🧑🏿‍🚀 ✌︎ #️⃣ 1️⃣",
    "zero\u200bwidth\u200c join\u200d er \ufeffbom soft\u00adhyphen word\u2060joiner \u2062 \u180e",
    "ctrl\x00nul\x01\x07bell\x1besc\x7fdel\x85nel \x9f",
    "tabs\tand\nnewlines\r\nand\rreturns \u00a0nbsp \u2003em \u3000ideo \u2028ls \u2029ps \x0b\x0c  end  ",
    "العربية עברית हिन्दी বাংলা ไทย ქართული Ελληνικά Հայերեն ᚠᚢᚦ 𐍈 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛 ℌ ℵ ⅓ ² ³ ½ Ⅻ",
    "<|startoftext|>a fox<|endoftext|> <|endoftext|><|startoftext|> <|ENDOFTEXT|> <|endoftext| >",
]

PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["...", "--", "—", "–", "’", "‘", "“", "”", "«", "»", "¿", "¡", "•", "…"]
CONTRACTIONS = ["don't", "I'LL", "it's", "'s", "we've", "they're", "I'm", "she'd", "rock'n'roll", "o'clock",
                "can’t", "won't've", "'tis", "y'all'd've", "ma'am", "''", "'", "O'Neil's", "'S", "'Ll", "'RE"]
NUMBERS = ["0", "7", "42", "1234567890", "3.14159", "-17", "+1", "$100", "1e-5", "2,048", "50%", "1/2", "0x1F",
           "١٢٣", "٣", "①", "Ⅳ", "１２３", "10:30pm", "2026-11-24", "#1", "v2.1", "1080p", "4K"]


def random_unicode(rng, n):
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x22FF), (0x2500, 0x27BF),
              (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F),
              (0x1F900, 0x1F9FF), (0x0, 0x1F), (0x300, 0x36F)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(blocks)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def cases(seed=20261124):
    rng = random.Random(seed)
    out = ["", " ", "\t\n", "a", "A", "a watercolor fox", "  A   Watercolor\tFOX  ", "!", "'s", "''s"]
    out += SCRIPTS
    for _ in range(500):  # prose
        n = rng.randint(1, 30)
        s = " ".join(rng.choice(WORDS) for _ in range(n))
        if rng.random() < 0.5: s = s.capitalize() + rng.choice([".", "!", "?", "", "...", ";"])
        if rng.random() < 0.2: s = s.upper()
        out.append(s)
    for _ in range(300):  # prompt lists, with weights and brackets as people write them
        parts = []
        for _ in range(rng.randint(2, 12)):
            w = " ".join(rng.choice(PROMPT_WORDS) for _ in range(rng.randint(1, 3)))
            r = rng.random()
            if r < 0.15: w = f"({w}:{rng.choice(['1.2', '0.8', '1.5'])})"
            elif r < 0.25: w = f"[{w}]"
            elif r < 0.3: w = "{" + w + "}"
            parts.append(w)
        out.append(rng.choice([", ", ",", " | ", ". "]).join(parts))
    for _ in range(300):  # punctuation, digits and contractions mixed into words
        toks = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.3: toks.append(rng.choice(PUNCT) * rng.randint(1, 3))
            elif r < 0.5: toks.append(rng.choice(NUMBERS))
            elif r < 0.7: toks.append(rng.choice(CONTRACTIONS))
            else: toks.append(rng.choice(WORDS))
        out.append(rng.choice(["", " "]).join(toks))
    for _ in range(400):  # fragments of the scripts above and random code points, mixed with words
        pieces = []
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.35:
                s = rng.choice(SCRIPTS)
                i = rng.randrange(len(s))
                pieces.append(s[i : i + rng.randint(1, 12)])
            elif r < 0.7: pieces.append(random_unicode(rng, rng.randint(1, 8)))
            else: pieces.append(rng.choice(WORDS + CONTRACTIONS + NUMBERS))
        out.append(rng.choice(["", " ", "\t", "\n", "\u00a0"]).join(pieces))
    for _ in range(250):  # whitespace of every kind around and between words
        ws = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\u200b", "\x0b", "\x0c", "\u2028", "\x85"]
        out.append("".join(rng.choice(ws) + rng.choice(WORDS) for _ in range(rng.randint(1, 8))) + rng.choice(ws))
    for _ in range(200):  # far over 77 tokens
        n = rng.randint(60, 400)
        out.append(" ".join(rng.choice(WORDS + PROMPT_WORDS + PUNCT) for _ in range(n)))
    for _ in range(50):  # one long run of a character class: long words, digit runs, emoji strings
        c = rng.choice(["a", "z", "9", "!", "😀", "日", "é", "e\u0301", "'", "ab"])
        out.append(c * rng.randint(2, 120))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vocab_gz")
    ap.add_argument("out")
    ap.add_argument("--tokenizer-dir")
    a = ap.parse_args()
    import tokenizers
    import transformers
    from transformers import CLIPTokenizer

    tmp = a.tokenizer_dir or "/tmp/clip_tokenizer_src"
    vocab, merges = clip_vocab.write_vocab_and_merges(a.vocab_gz, tmp)
    tok = CLIPTokenizer(vocab, merges, pad_token="<|endoftext|>", model_max_length=77)
    tok_bang = CLIPTokenizer(vocab, merges, pad_token="!", model_max_length=77)
    if a.tokenizer_dir:
        tok.save_pretrained(os.path.join(a.tokenizer_dir, "saved_sd1"))
        tok_bang.save_pretrained(os.path.join(a.tokenizer_dir, "saved_sd2"))
    try:
        import ftfy  # noqa: F401
        has_ftfy = True
    except ImportError:
        has_ftfy = False
    rows = []
    for text in cases():
        row = {"text": text}
        for key, t, pad in (("ids", tok, 49407), ("ids_pad_bang", tok_bang, 0)):
            ids = t(text)["input_ids"]
            cut = t(text, truncation=True, max_length=77, padding="max_length")["input_ids"]
            expect = (ids[:76] + [49407] if len(ids) > 77 else ids) + [pad] * max(0, 77 - len(ids))
            assert cut == expect, (text, cut, ids)
            if key == "ids" or ids != row["ids"]:
                row[key] = ids
        rows.append(row)
    meta = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "class": type(tok).__name__, "bases": [c.__name__ for c in type(tok).__mro__[:4]], "ftfy": has_ftfy,
            "padding": "truncation to 77 keeps BOS, the first 75 tokens and EOS; then the pad id (49407 or 0) to 77",
            "source": "tools/reference/export_clip_tokenizer_golden.py"}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cases": rows}, f, ensure_ascii=True, indent=0)
    print(f"{len(rows)} strings, {sum(len(r['ids']) for r in rows)} ids, longest {max(len(r['ids']) for r in rows)}; {meta}")


if __name__ == "__main__":
    main()
