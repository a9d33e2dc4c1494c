#!/usr/bin/env python3
"""The speed targets (docs/perf.md, "Where the targets stand") from one tools/gpu-targets.sh
run: each figure against its target, as a ratio measured in the run, met or not.
Usage: tools/targets_summary.py JSON_FOLDER"""
import glob
import json
import os
import re
import sys

# The peer's figures (ggml-vulkan test-backend-ops perf on the H200, wall clock per op, us).
PEER_MATMUL = {
    "pp.f16.k4096.n14336.m512": 276, "pp.f16.k14336.n4096.m512": 261,
    "pp.q8_0.k4096.n14336.m512": 343, "pp.q4_K.k4096.n14336.m512": 384,
    "batch.f16.k4096.n14336.m32": 59, "batch.q4_K.k4096.n14336.m32": 123,
    "batch.q8_0.k4096.n14336.m8": 62, "batch.f16.k4096.n14336.m8": 105,
    "spec.q8_0.k5120.n14336.m2": 33, "spec.q8_0.k5120.n14336.m4": 47,
    "spec.q4_K.k5120.n14336.m2": 38, "spec.q4_K.k5120.n14336.m4": 69,
    "spec.q4_K.k5120.n14336.m8": 119,
}
PEER_ATTENTION = {(64, 7680, "f16"): 21.7, (64, 7680, "q8_0"): 33.5,
                  (256, 20000, "f16"): 54.5, (256, 20000, "q8_0"): 57.2}
TG_TARGET = {"f16": 0.85, "q8_0": 0.6, "q4_K": 0.6}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def verdict(ok):
    return "met" if ok else "NOT met"


def fields(path):
    """The fields of a result's name: tg+llama3-8b+q4_K.json -> [llama3-8b, q4_K]."""
    return os.path.basename(path)[:-len(".json")].split("+")[1:]


def results(folder, kind, needs):
    """(name fields, result) of each run of a kind whose result has the member `needs`."""
    for path in sorted(glob.glob(os.path.join(folder, kind + "+*.json"))):
        r = load(path)
        if r and r.get(needs):
            yield fields(path), r


def rows_models(folder, out):
    for path in sorted(glob.glob(os.path.join(folder, "tg+*.json"))):
        preset, typ = fields(path)
        r = load(path)
        if not r or not r.get("p50_ms"):
            out.append((f"{preset} {typ} tg", "no result", "", ""))
            continue
        ratio = r["roofline_ms"] / r["p50_ms"]
        target = TG_TARGET.get(typ) if preset == "llama3-8b" else None
        fig = f"{r['tg_tokens_per_s']:.1f} tok/s, p50 {r['p50_ms']:.3f} ms, {ratio:.2f} x roofline"
        out.append((f"{preset} {typ} tg at ~96", fig,
                    f">= {target} x roofline" if target else "(reported)",
                    verdict(ratio >= target) if target else ""))
        if r.get("load_vs_pinned"):
            out.append((f"{preset} {typ} warm load, one device",
                        f"{r['load_gbps']:.1f} GB/s, {r['load_vs_pinned']:.2f} x pinned",
                        ">= 0.8 x pinned", verdict(r["load_vs_pinned"] >= 0.8)))
    for names, r in results(folder, "sample", "p50_ms"):
        preset, typ, where = names
        out.append((f"{preset} {typ} tg at ~96, temperature 0.8 drawn on the {where}",
                    f"{r['tg_tokens_per_s']:.1f} tok/s, p50 {r['p50_ms']:.3f} ms, "
                    f"{r.get('choose_us', 0):.1f} us to the next id", "(reported)", ""))
    for (preset, typ), r in results(folder, "pp", "p50_ms"):
        out.append((f"{preset} {typ} pp512, tg at ~544",
                    f"pp {r['pp_tokens_per_s']:.0f} tok/s, tg {r['tg_tokens_per_s']:.1f} "
                    f"({r['roofline_ms'] / r['p50_ms']:.2f} x roofline)", "(reported)", ""))
    for (preset, typ, kv), r in results(folder, "depth", "p50_ms"):
        out.append((f"{preset} {typ} tg at {r.get('depth')} tokens, K/V {kv}",
                    f"{r['tg_tokens_per_s']:.1f} tok/s ({r['roofline_ms'] / r['p50_ms']:.2f} x "
                    "roofline)", "(reported)", ""))


def rows_load2(folder, out):
    for (preset, typ), r in results(folder, "load2", "load_vs_pinned"):
        out.append((f"{preset} {typ} warm load, two devices",
                    f"{r['load_gbps']:.1f} GB/s, {r['load_vs_pinned']:.2f} x pinned "
                    f"({r.get('load_vs_pinned_all', 0):.2f} x into both at once)",
                    ">= 0.8 x pinned", verdict(r["load_vs_pinned"] >= 0.8)))


def case_name(bench, c):
    """A case's whole name: the last word of its line in the bench's file (the JSON's name is
    cut at 100 characters)."""
    try:
        with open(bench["file"]) as f:
            return f.read().split("\n")[c["line"] - 1].split()[-1]
    except (OSError, KeyError, IndexError):
        return c.get("name", "")


def copy_rate(folder, bench):
    """The run's device copy rate (read + written, GB/s): the largest the service's runs and
    the bench measured (the bench's short copy reads low on some GPUs: 1.7 against 2.9 TB/s
    on an H100)."""
    rates = [bench.get("copy_gbps", 0)] if bench else []
    for path in glob.glob(os.path.join(folder, "*+*.json")):
        r = load(path)
        if isinstance(r, dict) and r.get("copy_gbps"):
            rates.append(r["copy_gbps"])
    return max(rates, default=0)


def rows_attention(folder, out):
    r = load(os.path.join(folder, "cases+attention.json"))
    copy = copy_rate(folder, r)
    for c in (r or {}).get("results", []):
        name = case_name(r, c)
        m = re.search(r"hsk=(\d+).*kv=(\d+).*type_KV=(\w+),permute=\[([\d,]+)\]", name)
        if not m:
            continue
        head, kv, typ, perm = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
        layout = "head-major" if perm == "0,1,2,3" else "cache layout"
        what = f"attention head {head}, {kv} tokens, {typ}, {layout}"
        # the K/V bytes at the run's copy rate
        roof = c["us"] / (c["kv_bytes"] / (copy * 1e3)) if copy and c.get("kv_bytes") else 0
        fig = f"{c['us']:.1f} us GPU, {c.get('wall_us', 0):.1f} wall, {roof:.2f} x K/V roofline"
        if c.get("wrong"):
            fig += f", {c['wrong']} WRONG"
        if kv == 32768:
            out.append((what, fig, "<= 1.3 x roofline", verdict(roof <= 1.3)))
        elif (head, kv, typ) in PEER_ATTENTION:
            peer = PEER_ATTENTION[(head, kv, typ)]
            out.append((what, fig + f"; peer {peer}", "(the peer's shapes)",
                        f"{c.get('wall_us', c['us']) / peer:.2f} x the peer"))
        else:
            out.append((what, fig, "(reported)", ""))


def rows_matmul(folder, out):
    r = load(os.path.join(folder, "cases+matmul.json"))
    for c in (r or {}).get("results", []):
        name = c.get("name", "")
        peer = PEER_MATMUL.get(name)
        m = re.search(r"\.m(\d+)$", name)
        wall = c.get("wall_us", c.get("us", 0))
        fig = f"{c.get('us', 0):.1f} us GPU, {wall:.1f} wall"
        if c.get("wrong"):
            fig += f", {c['wrong']} WRONG"
        if not peer or not m:
            out.append((name, fig, "(reported)", ""))
            continue
        cols = int(m.group(1))
        limit = 1.25 if cols >= 512 else 1.1 if cols >= 32 else 1.0
        out.append((name, fig + f"; peer {peer}", f"<= {limit} x the peer",
                    f"{verdict(wall / peer <= limit)} ({wall / peer:.2f} x)"))


def rows_cold(folder, out):
    for path in sorted(glob.glob(os.path.join(folder, "cold+*.json"))):
        preset, typ = fields(path)
        r, dd = load(path), load(os.path.join(folder, f"dd+{preset}+{typ}.json"))
        if not r or not dd or not dd.get("seconds"):
            out.append((f"{preset} {typ} cold load", "no result", "", ""))
            continue
        disk = dd["bytes"] / dd["seconds"] * 1e-9
        ratio = r["load_gbps"] / disk
        out.append((f"{preset} {typ} cold load", f"{r['load_gbps']:.2f} GB/s, disk {disk:.2f} GB/s"
                    f" (dd iflag=direct): {ratio:.2f} x", ">= 0.9 x the disk", verdict(ratio >= 0.9)))
        limit = 1.2 * r["load_bytes"] * 1e-9 / disk + 1
        out.append((f"{preset} {typ} cold time to first token", f"{r['ttft_s']:.2f} s",
                    f"<= {limit:.2f} s", verdict(r["ttft_s"] <= limit)))


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    out = []
    for part in (rows_models, rows_load2, rows_attention, rows_matmul, rows_cold):
        part(folder, out)
    machine = os.path.join(os.path.dirname(folder.rstrip("/")), "machine.txt")
    if os.path.exists(machine):
        print(open(machine).read().strip())
    print("| figure | measured | target | |")
    print("|---|---|---|---|")
    for row in out:
        print("| " + " | ".join(row) + " |")
    met = sum(1 for r in out if r[3].startswith("met"))
    missed = sum(1 for r in out if r[3].startswith("NOT"))
    print(f"{met} targets met, {missed} not met, {len(out) - met - missed} figures reported")


if __name__ == "__main__":
    main()
