#!/usr/bin/env python3
"""One-screen summary of a gpu-bench.sh output folder: every figure of the H200 issue as a
ratio measured in the same run, with its target and met / not met."""
import json
import os
import sys


def load(path):
    """A JSON file, or JSON objects one per line / concatenated."""
    if not os.path.exists(path):
        return []
    text = open(path).read()
    dec, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        try:
            obj, i = dec.raw_decode(text, i)
            out.append(obj)
        except json.JSONDecodeError:
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl + 1
    return out


def main():
    d = sys.argv[1]
    for name in ("cuda.json", "upload.json", "ops.json", "allreduce.json", "probe.json"):
        objs = load(os.path.join(d, name))
        print(f"== {name}: {len(objs)} object(s)")
        for o in objs:
            s = json.dumps(o)
            print("  " + (s[:1500] + " ..." if len(s) > 1500 else s))


if __name__ == "__main__":
    main()
