#!/usr/bin/env python3
"""One-screen summary of a gpu-bench.sh output folder: each figure of the "H200 figures" issue
as a ratio measured in the same run, with its target and met / not met."""
import json
import os
import sys


def load(path):
    """JSON objects from a file holding one or several concatenated objects."""
    if not os.path.exists(path):
        return []
    text, dec, out, i = open(path).read(), json.JSONDecoder(), [], 0
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


def first(objs):
    return objs[0] if objs else {}


def result(ops, bench, prefix):
    for o in ops:
        if o.get("bench") == bench:
            for r in o.get("results", []):
                if r.get("name", "").startswith(prefix):
                    return r
    return {}


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    cuda = first(load(os.path.join(d, "cuda.json")))
    up = first(load(os.path.join(d, "upload.json")))
    ops = load(os.path.join(d, "ops.json"))
    ar = first(load(os.path.join(d, "allreduce.json")))
    rows = []

    def row(name, value, target, ok, detail):
        rows.append((name, value, target, "met" if ok else "NOT met", detail))

    pinned = cuda.get("h2d_pinned_GBps")
    cases = {(c["source"], c["policy"]): c for c in up.get("cases", [])}
    for (src, pol), label in ((("file", "always-prestage"), "pre-staged file mmap upload"),
                              (("file", "import-then-prestage"), "file mmap, import-then-prestage"),
                              (("anon", "import-then-prestage"), "imported anonymous upload")):
        c = cases.get((src, pol))
        if c and pinned and c.get("ok"):
            r = c["upload_gbps"] / pinned
            row(label, f"{r:.3f}", ">= 0.93", r >= 0.93,
                f"{c['upload_gbps']:.1f} vs CUDA pinned {pinned:.1f} GB/s, path {c['path']}")
    if up.get("ring_speedup"):
        r = up["ring_speedup"]
        row("staging ring vs serialized", f"{r:.2f}x", ">= 4x", r >= 4,
            f"{up['staging_ring_gbps']:.1f} vs {up['serialized_memcpy_copy_gbps']:.1f} GB/s")
    if up.get("prestage_copy_speedup"):
        r = up["prestage_copy_speedup"]
        row("threaded pre-stage copy", f"{r:.2f}x", ">= 3x", r >= 3,
            f"{up['prestage_copy_threads']} threads {up['prestage_copy_n_threads_gbps']:.1f} vs 1 "
            f"thread {up['prestage_copy_1_thread_gbps']:.1f} GB/s")
    d2d = cuda.get("d2d_GBps_read_plus_write")
    copy = result(ops, "copy", "copy kernel")
    if copy and d2d:
        r = copy["gbps"] / d2d
        row("copy kernel vs CUDA D2D", f"{r:.3f}", ">= 0.95", r >= 0.95,
            f"{copy['gbps']:.0f} vs {d2d:.0f} GB/s")
    for bench, prefix, label in (("transpose", "transpose f32 16384", "tiled transpose f32"),
                                 ("concat", "concat dim0 f32 b transposed: fast", "concat fast path")):
        r = result(ops, bench, prefix)
        if r:
            row(f"{label} vs copy kernel", f"{r['ratio_to_copy_kernel']:.3f}", ">= 0.90",
                r["ratio_to_copy_kernel"] >= 0.90, f"{r['gbps']:.0f} GB/s")
    fvg = result(ops, "concat", "fast_vs_generic")
    if fvg:
        row("concat fast vs generic", f"{fvg['speedup']:.1f}x", ">= 20x", fvg["speedup"] >= 20, "")
    mv = result(ops, "matmul", "matvec f16")
    if mv and d2d:
        r = mv["gbps"] / d2d
        row("matvec f16 vs HBM (CUDA D2D traffic)", f"{r:.2f}", ">= 0.80", r >= 0.80,
            f"{mv['gbps']:.0f} vs {d2d:.0f} GB/s")
    floors = ar.get("floors") or {}
    relay = floors.get("relay_dev0_dev1_us")
    for t in ar.get("results", []):
        for rr in t.get("rows", []):
            if rr["size"] == 8192 and relay:
                r = rr["time_us"] / relay
                row(f"allreduce 8 KiB {t['transport']}", f"{rr['time_us']:.0f} us", "<= 1.2 x relay",
                    r <= 1.2, f"{r:.2f} x relay floor {relay:.0f} us (one device "
                    f"{floors.get('submit_wait_one_device_us', 0):.0f} us)")
            if rr["size"] == 256 << 20:
                row(f"allreduce 256 MiB {t['transport']}", f"{rr['busbw']:.2f} GB/s", "reported", True,
                    f"host-path bound ~ pinned H2D / 3 = {pinned / 3:.1f} GB/s" if pinned else "")
    w = max([len(r[0]) for r in rows] + [10])
    print(f"{'figure':<{w}}  {'value':>12}  {'target':<16} {'':8} detail")
    for name, value, target, ok, detail in rows:
        print(f"{name:<{w}}  {value:>12}  {target:<16} {ok:8} {detail}")
    if not rows:
        print("no results found in", d)


if __name__ == "__main__":
    main()
