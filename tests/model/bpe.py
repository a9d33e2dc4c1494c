"""tests/model/bpe.sh's references for the byte-level BPE tokenizer (run by /usr/bin/python3
with the build folder as its argument). Everything here is Python's own: the classes and the
splits come from the regex module (Debian's python3-regex), the BPE is GPT-2's merge loop over
the vocabulary and merges read from the GGUF file by a minimal parser; the C side is reached
through build/tests/unit/test_bpe (--classes, --split, --tokenize) and vkrt-service."""
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import unicodedata

import regex

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLIT = regex.compile(LLAMA3)

# What the random strings are made of: one item is a character or a short run.
ITEMS = (list("abcxyzABCXYZ0123456789") + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") +
         [" ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\x1c",
          "\xa0", "\u2003", "\u2028", "\u3000"] +                               # white space
         list("éèüñçøÅßſǅʰαΩжД") +                                              # letters
         list("中文日本語のテ한") +                                              # CJK, kana, Hangul
         ["🎉", "😀", "👍", "❤", "\u200d", "\ufe0f", "🇫", "🇷"] +             # emoji
         ["\u0301", "\u0308", "\u20dd"] +                                       # combining marks
         list("٣²½Ⅻ５𝟙〇") +                                                    # other numbers
         ["'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "'ſ", "'x"] +
         ["the", "don't", " hello", "I'm", "€", "—", "…", "\u00ad", "\u200b"])
SPECIALS = ["<|eot_id|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot", "<|", "|>"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def random_text(rng, items, n_max):
    return "".join(rng.choice(items) for _ in range(rng.randint(1, n_max)))


def run(cmd, stdin=b""):
    p = subprocess.run(cmd, input=stdin, capture_output=True)
    if p.returncode:
        fail(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout.decode(errors='replace')}"
             f"{p.stderr.decode(errors='replace')}")
    return p.stdout


# ---- GGUF: the metadata key/values (and where each value lies, for patching) ----------------

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}


def read_gguf_metadata(path):
    data = open(path, "rb").read()
    if data[:4] != b"GGUF":
        fail(f"{path}: not GGUF")
    pos = 8

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def value(t):
        nonlocal pos
        if t == 8:
            n = take("<Q")
            pos += n
            return data[pos - n:pos]
        if t == 9:
            elem, n = take("<I"), take("<Q")
            return [value(elem) for _ in range(n)]
        return take(SCALARS[t])

    take("<Q")  # tensors
    kv, where = {}, {}
    for _ in range(take("<Q")):
        key = value(8).decode()
        t = take("<I")
        where[key] = (pos, t)
        kv[key] = value(t)
    return kv, where


# ---- GPT-2 byte-level BPE -------------------------------------------------------------------

def bytes_to_unicode():
    own = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
           list(range(ord("®"), ord("ÿ") + 1)))
    chars, n = {b: chr(b) for b in own}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + n)
            n += 1
    return chars


class Bpe:
    def __init__(self, kv):
        self.tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
        self.types = kv["tokenizer.ggml.token_type"]
        self.vocab = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {}
        for i, m in enumerate(kv["tokenizer.ggml.merges"]):
            a, b = m.decode().split(" ", 1)
            self.ranks.setdefault((a, b), i)
        self.special = sorted((i for i, t in enumerate(self.types)
                               if t in (2, 3, 4) and self.tokens[i]),
                              key=lambda i: (-len(self.tokens[i].encode()), i))
        self.byte_char = bytes_to_unicode()
        self.char_byte = {c: b for b, c in self.byte_char.items()}

    def merge(self, word):
        """GPT-2's loop: the pair of lowest rank, every occurrence left to right, again."""
        if word in self.vocab:  # Llama 3's ignore_merges: a piece that is a token stays whole
            return [word]
        parts = list(word)
        while len(parts) > 1:
            rank, a, b = min((self.ranks.get((x, y), float("inf")), x, y)
                             for x, y in zip(parts, parts[1:]))
            if rank == float("inf"):
                break
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        return parts

    def encode(self, text):
        frags = [(text, None)]
        for sid in self.special:  # llama.cpp's parse_special: longest first, left to right
            s, out = self.tokens[sid], []
            for frag, fid in frags:
                if fid is not None:
                    out.append((frag, fid))
                    continue
                start = 0
                while (j := frag.find(s, start)) >= 0:
                    if j > start:
                        out.append((frag[start:j], None))
                    out.append((s, sid))
                    start = j + len(s)
                if start < len(frag):
                    out.append((frag[start:], None))
            frags = out
        ids = []
        for frag, fid in frags:
            if fid is not None:
                ids.append(fid)
                continue
            for piece in SPLIT.findall(frag):
                word = "".join(self.byte_char[b] for b in piece.encode())
                ids += [self.vocab[p] for p in self.merge(word)]
        return ids

    def decode(self, ids):
        out = b""
        for i in ids:
            if self.types[i] == 1:
                out += b"".join(bytes([self.char_byte[c]]) if c in self.char_byte else c.encode()
                                for c in self.tokens[i])
            elif self.types[i] == 4:
                out += self.tokens[i].encode()
        return out


# ---- the checks -----------------------------------------------------------------------------

def check_classes(test_bpe):
    got = run([test_bpe, "--classes"]).decode().strip()
    if len(got) != 0x110000:
        fail(f"--classes printed {len(got)} classes")
    classes = {"L": regex.compile(r"\p{L}"), "N": regex.compile(r"\p{N}"),
               "S": regex.compile(r"\s")}
    want_of = lambda ch: next((k for k, p in classes.items() if p.match(ch)), "O")
    checked = differ = skipped = 0
    for cp in range(0x110000):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat == "Cn":  # unassigned here: regex may know a newer Unicode
            continue
        want = want_of(ch)
        if want not in (cat[0] if cat[0] in "LN" else "OS"):  # the two Pythons' Unicode differ
            skipped += 1
            continue
        checked += 1
        if got[cp] != want:
            differ += 1
            if differ <= 10:
                print(f"U+{cp:04X} ({cat}): C class {got[cp]}, regex {want}")
    if differ:
        fail(f"{differ} of {checked} code points classed otherwise than regex does")
    print(f"classes: {checked} assigned code points (Unicode {unicodedata.unidata_version}) "
          f"as regex {regex.__version__} classes them ({skipped} where unicodedata and regex "
          f"disagree left out)")


def check_splits(test_bpe, rng):
    texts = [random_text(rng, ITEMS, 30) for _ in range(4000)]
    lines = run([test_bpe, "--split"], "".join(t.encode().hex() + "\n" for t in texts).encode())
    lines = lines.decode().split("\n")
    for i, text in enumerate(texts):
        want = SPLIT.findall(text)
        if "".join(want) != text:
            fail(f"regex.findall does not cover {text!r}")
        got = [bytes.fromhex(h).decode(errors="replace") for h in lines[i].split(" ") if h]
        if got != want:
            fail(f"split of {text!r}:\n  C      {got}\n  regex  {want}")
    print(f"splits: {len(texts)} random strings split as regex.findall does "
          f"({sum(len(SPLIT.findall(t)) for t in texts)} pieces)")


def check_tokenize(test_bpe, path, bpe, rng):
    words = ["the", " the", " hello", "hello", " world", " 12", "345", ".\n\n", " (", "'s", "  "]
    items = ITEMS + words * 4 + SPECIALS
    texts = [random_text(rng, items, 40) for _ in range(600)]
    out = run([test_bpe, "--tokenize", path],
              "".join(t.encode().hex() + "\n" for t in texts).encode())
    specials = 0
    for text, line in zip(texts, out.decode().split("\n")):
        ids_text, decoded = line.split("\t")
        got = [int(x) for x in ids_text.split(",") if x]
        want = bpe.encode(text)
        if got != want:
            fail(f"ids of {text!r}:\n  C       {got}\n  Python  {want}")
        if bytes.fromhex(decoded) != bpe.decode(want):
            fail(f"decoding {want}: C {bytes.fromhex(decoded)!r}, Python {bpe.decode(want)!r}")
        has_special = any(bpe.types[i] == 3 for i in want)
        specials += has_special
        if not has_special and bpe.decode(want) != text.encode():
            fail(f"{text!r} decodes to {bpe.decode(want)!r}")
    print(f"tokenize: {len(texts)} random strings ({specials} with control tokens) to the ids of "
          f"the Python BPE over the file's {len(bpe.tokens)} tokens and "
          f"{len(bpe.ranks)} merges; decoded back")


def service(svc, path, prompt, bpe):
    out = run([svc, "--weights", path, "--prompt", prompt, "--tokens", "8", "--print-ids",
               "--warmup-ms", "0", "--devices", "1"])
    if b"greedy choice the same at every position: passed" not in out:
        fail(f"not verified:\n{out.decode(errors='replace')}")
    field = lambda name: re.search(rb"^" + name + rb": ([0-9,]*)$", out, re.M).group(1).decode()
    prompt_ids = [int(x) for x in field(b"prompt ids").split(",")]
    ids = [int(x) for x in field(b"ids").split(",")]
    text = re.search(rb"^text: (.*?)\nprompt ids: ", out, re.S | re.M).group(1)
    want = [bpe.vocab["<|begin_of_text|>"]] + bpe.encode(prompt)
    if prompt_ids != want:
        fail(f"prompt ids {prompt_ids}, the Python BPE {want}")
    if text != bpe.decode(ids):
        fail(f"text {text!r}, the generated ids {ids} decode to {bpe.decode(ids)!r}")
    return prompt_ids, ids, text


def check_usage(svc, path, work):
    """--vocab-type: a llama model's only, spm or gpt2, and the vocabulary big enough."""
    mlp = [svc, "--make-gguf", os.path.join(work, "x.gguf"), "--layers", "1", "--hidden", "64",
           "--ffn", "64"]
    for args, msg in ((mlp + ["--vocab-type", "gpt2"], "--vocab-type is a llama model's"),
                      (mlp + ["--heads", "2", "--vocab-type", "bpe"],
                       "bad or incomplete argument '--vocab-type bpe'"),
                      (mlp + ["--heads", "2", "--vocab", "258", "--vocab-type", "gpt2"],
                       "a vocabulary of 258 tokens (259.."),
                      ([svc, "--weights", path, "--vocab-type", "gpt2"],
                       "--vocab-type describes a file --make-gguf writes")):
        p = subprocess.run(args, capture_output=True)
        if p.returncode != 2 or msg.encode() not in p.stderr:
            fail(f"{' '.join(args[1:])}: exit {p.returncode}, want 2 and {msg!r}:\n"
                 f"{p.stderr.decode(errors='replace')}")
    print("--vocab-type: refused for the MLP stack, for another value, for 258 tokens and "
          "with --weights (exit 2, named)")


def patched(path, kv_where, key, value):
    data = bytearray(open(path, "rb").read())
    pos, t = kv_where[key]
    assert t == 4, key
    struct.pack_into("<I", data, pos, value)
    out = path + "." + key.rsplit(".", 1)[1]
    open(out, "wb").write(data)
    return out


def main():
    builddir = sys.argv[1]
    test_bpe, svc = f"{builddir}/tests/unit/test_bpe", f"{builddir}/bin/vkrt-service"
    rng = random.Random(20261205)
    check_classes(test_bpe)
    check_splits(test_bpe, rng)
    with tempfile.TemporaryDirectory(prefix="vkrt-bpe.") as work:
        path = os.path.join(work, "gpt2.gguf")
        run([svc, "--make-gguf", path, "--heads", "4", "--kv-heads", "2", "--layers", "2",
             "--hidden", "512", "--ffn", "1024", "--vocab", "2000", "--vocab-type", "gpt2"])
        kv, where = read_gguf_metadata(path)
        if (kv["tokenizer.ggml.model"], kv["tokenizer.ggml.pre"]) != (b"gpt2", b"llama-bpe"):
            fail("--vocab-type gpt2 wrote another tokenizer")
        bpe = Bpe(kv)
        n = len(bpe.tokens)
        if (n != 2000 or [bpe.tokens[i] for i in range(n - 3, n)] != SPECIALS[1:3] + SPECIALS[:1]
                or bpe.types[n - 3:] != [3, 3, 3] or kv["tokenizer.ggml.bos_token_id"] != n - 3
                or kv["tokenizer.ggml.eos_token_id"] != n - 2
                or kv["tokenizer.ggml.eot_token_id"] != n - 1
                or bpe.tokens[:256] != [bpe.byte_char[b] for b in range(256)]):
            fail("the vocabulary is not the 256 byte characters, merged pieces and the three "
                 "control tokens")
        for i, m in enumerate(kv["tokenizer.ggml.merges"]):
            a, b = m.decode().split(" ")
            if bpe.vocab[a + b] != 256 + i or bpe.vocab[a] >= 256 + i or bpe.vocab[b] >= 256 + i:
                fail(f"merge {i} {m!r} does not build token {256 + i} from earlier ones")
        check_tokenize(test_bpe, path, bpe, rng)
        check_usage(svc, path, work)
        prompt = ("Hello world, it's 2026! The café costs 12345 \u00a5 \u2014 naïve 日本語 🎉\n\n"
                  "  indented\tline<|eot_id|>after'S")
        prompt_ids, ids, text = service(svc, path, prompt, bpe)
        print(f"vkrt-service: prompt {prompt!r} -> {len(prompt_ids)} ids as the Python BPE's "
              f"(BOS first, <|eot_id|> one token); generated {ids} -> {text!r}")
        # EOT and EOS end the generation: the file patched so that a generated token is one
        for key, k in (("tokenizer.ggml.eot_token_id", 2), ("tokenizer.ggml.eos_token_id", 1)):
            stop = ids[k]
            _, got, _ = service(svc, patched(path, where, key, stop), prompt, bpe)
            want = ids[:ids.index(stop) + 1]
            if got != want:
                fail(f"{key} = {stop}: generated {got}, want {want} (stopped there)")
            print(f"{key} = {stop} (a token the model generates): generation stops after it: {got}")


if __name__ == "__main__":
    main()
