#!/usr/bin/env python3
"""CUDA baselines measured in the same run as vkrt-bench on the GPU machine (PyTorch there):
pinned host-to-device copy GB/s and device-to-device copy GB/s (bytes read + written), plus
the HBM read rate used as the matmul bound. Prints one JSON object."""
import json
import sys

import torch


def timed(fn, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(3):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        best.append(start.elapsed_time(end) / 1e3 / iters)
    return min(best)


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    dev = torch.device("cuda")
    host = torch.empty(size, dtype=torch.uint8).pin_memory()
    host.random_(0, 255)
    dst = torch.empty(size, dtype=torch.uint8, device=dev)
    h2d = timed(lambda: dst.copy_(host, non_blocking=True), 5)
    pageable = torch.empty(size, dtype=torch.uint8)
    h2d_pageable = timed(lambda: dst.copy_(pageable), 2)
    d2d_src = torch.empty(4 * size, dtype=torch.uint8, device=dev)
    d2d_dst = torch.empty_like(d2d_src)
    d2d = timed(lambda: d2d_dst.copy_(d2d_src), 10)
    out = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "h2d_pinned_GBps": size / h2d / 1e9,
        "h2d_pageable_GBps": size / h2d_pageable / 1e9,
        "d2d_GBps_read_plus_write": 2 * 4 * size / d2d / 1e9,
        "d2d_read_GBps": 4 * size / d2d / 1e9,
        "bytes": size,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
